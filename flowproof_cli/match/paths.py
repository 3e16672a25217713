"""Path globs over a canonical request: `metadata.user_id`, `input.*.id`, `system`.

A glob is dotted segments; `*` stands for any one key or list index, a number also matches
that list index. Paths are over the canonical request (what the trace stores), so a rule
reads the same in the spec, in the trace and in a divergence report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WILDCARD = "*"

Path = tuple[str | int, ...]


class GlobError(ValueError):
    """A glob that cannot name anything (empty, or with an empty segment)."""


@dataclass(frozen=True)
class PathGlob:
    text: str
    segments: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> PathGlob:
        stripped = text.strip()
        if not stripped:
            raise GlobError("the path is empty")
        segments = tuple(stripped.split("."))
        if any(not segment for segment in segments):
            raise GlobError(
                f"the path `{text}` has an empty segment (two dots, or a dot at an end)"
            )
        return cls(stripped, segments)

    def __str__(self) -> str:
        return self.text

    @staticmethod
    def _segment_matches(segment: str, part: str | int) -> bool:
        return segment == WILDCARD or segment == str(part)

    def covers(self, path: Path) -> bool:
        """True when `path` is this glob's path or lies below one (`system` covers
        `system.0.text`)."""
        if len(path) < len(self.segments):
            return False
        return all(
            self._segment_matches(segment, part)
            for segment, part in zip(self.segments, path, strict=False)
        )

    def drop(self, value: Any) -> tuple[Any, int]:
        """A copy of `value` without the fields this glob names, and how many it dropped."""
        return _drop(value, self.segments)


def _drop(value: Any, segments: tuple[str, ...]) -> tuple[Any, int]:
    head, rest = segments[0], segments[1:]
    if isinstance(value, dict):
        keys = [key for key in value if PathGlob._segment_matches(head, key)]
        if not keys:
            return value, 0
        copy = dict(value)
        dropped = 0
        for key in keys:
            if not rest:
                del copy[key]
                dropped += 1
            else:
                copy[key], count = _drop(value[key], rest)
                dropped += count
        return copy, dropped
    if isinstance(value, list):
        indexes = [i for i in range(len(value)) if PathGlob._segment_matches(head, i)]
        if not indexes:
            return value, 0
        if not rest:
            kept = [item for i, item in enumerate(value) if i not in set(indexes)]
            return kept, len(indexes)
        copy_list = list(value)
        dropped = 0
        for i in indexes:
            copy_list[i], count = _drop(value[i], rest)
            dropped += count
        return copy_list, dropped
    return value, 0


def map_strings(
    value: Any, change: Callable[[str], str], under: PathGlob | None = None
) -> tuple[Any, int]:
    """`value` with `change` applied to every string at or below `under` (every string when
    None), and how many strings it changed. Unchanged subtrees are returned as they were."""
    return _map(value, change, under, ())


def _map(
    value: Any, change: Callable[[str], str], under: PathGlob | None, path: Path
) -> tuple[Any, int]:
    if isinstance(value, str):
        if under is not None and not under.covers(path):
            return value, 0
        changed = change(value)
        return changed, int(changed != value)
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)  # type: ignore[assignment]
    else:
        return value, 0
    if under is not None and not _may_lead_to(under, path):
        return value, 0
    total = 0
    out: dict[Any, Any] | list[Any] = {} if isinstance(value, dict) else []
    for key, item in items:
        new, count = _map(item, change, under, (*path, key))
        total += count
        if isinstance(out, dict):
            out[key] = new
        else:
            out.append(new)
    return (out if total else value), total


def _may_lead_to(glob: PathGlob, path: Path) -> bool:
    """Whether some path below `path` could be covered by `glob` (prunes the walk)."""
    return all(
        PathGlob._segment_matches(segment, part)
        for segment, part in zip(glob.segments, path, strict=False)
    )
