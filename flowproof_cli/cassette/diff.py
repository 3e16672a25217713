"""Field-level differences between two JSON values: readable lines, and the full values.

A changed string too long to show whole is never cut to its first characters (an edit at
the end of a long prompt would print two identical lines). It is shown as a window around
its first differing character, with that offset, or, for multi-line text, as the changed
lines with their numbers. A changed JSON value (an object, a list) too long to show whole is
shown the same way, as its JSON text. Short values stay `recorded X, replayed Y`. A value
only one side has (a property a tool gained) is shown whole up to the length message text
is (ADDED_SHOWN), so the end of a JSON object (its `"type"`, keys being sorted) is not cut.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from flowproof_cli.quoting import disguised, named, odd_characters, unmasked

MAX_SHOWN = 80  # characters of a value shown in a message
ADDED_SHOWN = 300  # an added or removed value, shown whole up to this (as message text is)
CONTEXT = 32  # characters shown on each side of the first difference
LINE_WIDTH = 100  # a line of a line diff longer than this is clipped
SIDE_LINES = 4  # removed (or added) lines of one change shown at most

ChangeKind = Literal["changed", "added", "removed"]


@dataclass(frozen=True)
class FieldChange:
    """One changed field with both values whole, for machines (`--json`)."""

    path: str  # dotted, `*`-free: `system.0.text`, `metadata.user_id`
    recorded: Any = None  # None when the field is only in the replay
    replayed: Any = None  # None when the field is only in the recording
    kind: ChangeKind = "changed"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind} | {
            "recorded": self.recorded,
            "replayed": self.replayed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FieldChange:
        kinds: dict[Any, ChangeKind] = {"added": "added", "removed": "removed"}
        kind = kinds.get(data.get("kind"), "changed")
        return cls(str(data["path"]), data.get("recorded"), data.get("replayed"), kind)


def show(value: Any, limit: int = MAX_SHOWN) -> str:
    """A value as a short, readable token for a one-line message."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _escape(text: str) -> str:
    """Control characters made visible, so a window stays on one line; and characters that
    hide what they are (a Cyrillic `a`, a zero-width space) by their escape."""
    out = []
    for char in text:
        if char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"\\u{ord(char):04x}")
        elif ord(char) > 127 and disguised(char):
            out.append(unmasked(char))
        else:
            out.append(char)
    return "".join(out)


def _beside(text: Any, other: Any, limit: int) -> str:
    """`show`, except that a string that differs from `other` in characters outside printable
    ASCII is unmasked and those characters are listed by code point."""
    if isinstance(text, str) and isinstance(other, str) and odd_characters(text, other):
        return named(text, other)
    return show(text, limit)


def _odd_note(recorded: str, replayed: str) -> str:
    """` (replayed has U+0430 ... at char 6, ...)` for a long text's odd characters."""
    sides = (
        ("recorded", odd_characters(recorded, replayed)),
        ("replayed", odd_characters(replayed, recorded)),
    )
    parts = [f"{side} has {'; '.join(odd)}" for side, odd in sides if odd]
    return f" ({'; '.join(parts)})" if parts else ""


def first_difference(recorded: str, replayed: str) -> int:
    """The offset of the first differing character (the length of the common prefix)."""
    for index, (left, right) in enumerate(zip(recorded, replayed, strict=False)):
        if left != right:
            return index
    return min(len(recorded), len(replayed))


def window(text: str, at: int, context: int = CONTEXT, *, quote: bool = True) -> str:
    """`..."around at"...`: `context` characters each side of `at` (more after it when it
    is near the start), escaped. The start depends on `at` alone, so two windows align."""
    start = max(0, at - context)
    end = min(len(text), start + 2 * context)
    body = _escape(text[start:end])
    body = f'"{body}"' if quote else body
    return ("..." if start > 0 else "") + body + ("..." if end < len(text) else "")


def _of(position: int, recorded: int, replayed: int, unit: str) -> str:
    """`differs at char 12 of 40`, or with both sizes when they differ."""
    if recorded == replayed:
        return f"differs at {unit} {position} of {recorded}"
    return f"differs at {unit} {position} (recorded {recorded} {unit}s, replayed {replayed})"


def _texts(recorded: Any, replayed: Any, limit: int) -> tuple[str, str] | None:
    """The two values as texts when either would be clipped by `show` (two strings as they
    are; when either is a JSON value, both as JSON text), else None."""
    if isinstance(recorded, str) and isinstance(replayed, str):
        return (recorded, replayed) if _too_long(recorded, replayed, limit) else None
    texts = json.dumps(recorded, ensure_ascii=False), json.dumps(replayed, ensure_ascii=False)
    return texts if _too_long(*texts, limit) else None


def _too_long(recorded: Any, replayed: Any, limit: int) -> bool:
    """Both strings, and either would be clipped by `show`."""
    if not (isinstance(recorded, str) and isinstance(replayed, str)):
        return False
    # Escaping never shortens: a text already over the limit is not escaped whole (50 MB
    # of it took seconds).
    return any(len(text) > limit or len(_escape(text)) > limit for text in (recorded, replayed))


def _clip_line(text: str, at: int | None) -> str:
    if len(text) <= LINE_WIDTH:
        return _escape(text)
    return window(text, at or 0, quote=False)


def _capped(rows: list[str], side: str) -> list[str]:
    if len(rows) <= SIDE_LINES:
        return rows
    return [*rows[:SIDE_LINES], f"  ... {len(rows) - SIDE_LINES} more {side} line(s)"]


def _hunk(old: list[str], new: list[str], group: list[tuple[str, int, int, int, int]]) -> list[str]:
    """One group of difflib opcodes as numbered `-`/`+` lines with their context."""
    width = len(str(max(len(old), len(new))))
    rows: list[str] = []
    for tag, i1, i2, j1, j2 in group:
        if tag == "equal":
            rows += [f"  {n + 1:>{width}}  {_clip_line(old[n], None)}" for n in range(i1, i2)]
            continue
        pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        removed, added = [], []
        for n in range(i1, i2):
            partner = new[j1 + n - i1] if n - i1 < pairs else None
            at = first_difference(old[n], partner) if partner is not None else None
            removed.append(f"- {n + 1:>{width}}  {_clip_line(old[n], at)}")
        for n in range(j1, j2):
            partner = old[i1 + n - j1] if n - j1 < pairs else None
            at = first_difference(partner, new[n]) if partner is not None else None
            added.append(f"+ {n + 1:>{width}}  {_clip_line(new[n], at)}")
        rows += _capped(removed, "recorded") + _capped(added, "replayed")
    return rows


def line_diff(recorded: str, replayed: str) -> list[str]:
    """`differs at line N of M`, then the first changed lines with a line of context."""
    old, new = recorded.split("\n"), replayed.split("\n")
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    groups = list(matcher.get_grouped_opcodes(1))
    first = next(op for op in groups[0] if op[0] != "equal")
    lines = [_of(first[1] + 1, len(old), len(new), "line"), *_hunk(old, new, groups[0])]
    later = [op for group in groups[1:] for op in group if op[0] != "equal"]
    if later:
        count = sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in later)
        lines.append(f"  ... and {count} more changed line(s) after line {groups[0][-1][2]}")
    return lines


def contrast(recorded: Any, replayed: Any, limit: int = MAX_SHOWN) -> list[str]:
    """Two values as `recorded X, replayed Y`, or for long strings the place they differ.

    One line, except for multi-line text: a heading line, then the line diff.
    """
    texts = _texts(recorded, replayed, limit)
    if texts is None:
        shown_recorded, shown_replayed = (
            _beside(recorded, replayed, limit),
            _beside(replayed, recorded, limit),
        )
        return [f"recorded {shown_recorded}, replayed {shown_replayed}"]
    recorded, replayed = texts
    if "\n" in recorded or "\n" in replayed:
        return line_diff(recorded, replayed)
    at = first_difference(recorded, replayed)
    return [
        f"{_of(at, len(recorded), len(replayed), 'char')}: "
        f"recorded {window(recorded, at)}, replayed {window(replayed, at)}"
        f"{_odd_note(recorded, replayed)}"
    ]


def side_by_side(recorded: Any, replayed: Any, limit: int = MAX_SHOWN) -> list[str]:
    """Like `contrast`, but `recorded:` and `replayed:` on lines of their own, aligned."""
    texts = _texts(recorded, replayed, limit)
    if texts is None:
        return [
            f"recorded: {_beside(recorded, replayed, limit)}",
            f"replayed: {_beside(replayed, recorded, limit)}",
        ]
    recorded, replayed = texts
    if "\n" in recorded or "\n" in replayed:
        return line_diff(recorded, replayed)
    at = first_difference(recorded, replayed)
    return [
        _of(at, len(recorded), len(replayed), "char"),
        f"recorded: {window(recorded, at)}",
        f"replayed: {window(replayed, at)}{_odd_note(recorded, replayed)}",
    ]


_ADDED = ("dictionary_item_added", "iterable_item_added", "attribute_added")
_REMOVED = ("dictionary_item_removed", "iterable_item_removed", "attribute_removed")


def _deep_changes(recorded: Any, replayed: Any, path: list[str]) -> list[FieldChange]:
    """DeepDiff's tree view of one differing subtree, as FieldChanges. Lists compare by
    position, as the match does; `0` and `0.0`, `1` and `true` are type changes."""
    from deepdiff import DeepDiff  # noqa: PLC0415 - only a divergence pays its import

    found: list[FieldChange] = []
    for kind, items in DeepDiff(
        recorded, replayed, verbose_level=2, view="tree", threshold_to_diff_deeper=0
    ).items():
        for item in items:
            dotted = ".".join([*path, *(str(part) for part in item.path(output_format="list"))])
            dotted = dotted or "(root)"
            if kind in _ADDED:
                found.append(FieldChange(dotted, None, item.t2, "added"))
            elif kind in _REMOVED:
                found.append(FieldChange(dotted, item.t1, None, "removed"))
            else:
                found.append(FieldChange(dotted, item.t1, item.t2))
    return found


def _prune(recorded: Any, replayed: Any, path: list[str], found: list[FieldChange]) -> None:
    """Descend through mappings whose keys agree, skipping equal subtrees, so DeepDiff only
    sees what differs: a coding agent's 300 KB request with one edited prompt costs
    milliseconds, not a large part of a second."""
    if (
        isinstance(recorded, dict)
        and isinstance(replayed, dict)
        and recorded.keys() == replayed.keys()
    ):
        for key in recorded:
            left, right = recorded[key], replayed[key]
            if type(left) is not type(right) or left != right:
                _prune(left, right, [*path, str(key)], found)
        return
    found.extend(_deep_changes(recorded, replayed, path))


def changes(recorded: Any, replayed: Any, *, prefix: str = "") -> list[FieldChange]:
    """Every changed path with both values whole, sorted by path."""
    found: list[FieldChange] = []
    _prune(recorded, replayed, [prefix] if prefix else [], found)
    return sorted(found, key=lambda change: (change.path, change.kind))


def describe(change: FieldChange) -> list[str]:
    """`path: recorded X, replayed Y`, and the line diff under it for multi-line text."""
    if change.kind == "added":
        return [f"{change.path}: added in replay ({show(change.replayed, ADDED_SHOWN)})"]
    if change.kind == "removed":
        shown = show(change.recorded, ADDED_SHOWN)
        return [f"{change.path}: missing in replay (recorded {shown})"]
    head, *rest = contrast(change.recorded, change.replayed)
    return [f"{change.path}: {head}", *rest]


def field_changes(recorded: Any, replayed: Any, *, prefix: str = "", limit: int = 3) -> list[str]:
    """The first few changed paths, in a stable order, as message lines."""
    found = changes(recorded, replayed, prefix=prefix)
    lines = [line for change in found[:limit] for line in describe(change)]
    if len(found) > limit:
        lines.append(f"... and {len(found) - limit} more change(s)")
    return lines


_MORE = re.compile(r"\.\.\. and \d+ more change\(s\)")


def with_every_change(message: str, found: Sequence[FieldChange]) -> str:
    """A divergence message (`--all-changes`) with every changed field of the request
    listed under it, over the request's own paths (the ones `match: ignore:` takes), in
    place of its `... and N more change(s)` lines."""
    if not found:
        return message
    kept = [line for line in message.split("\n") if not _MORE.fullmatch(line.strip())]
    listed = [f"    {line}" for change in found for line in describe(change)]
    return "\n".join([*kept, f"  every changed field of the request ({len(found)}):", *listed])
