"""The `match:` block of a spec or a suite: declared, narrow relaxations of strict matching.

Validated here so a bad regex, an empty path or an unknown preset is a SpecError at its own
line; the rules themselves are built from this data at run time (`flowproof_cli.match`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from flowproof_cli.match.build import Declared
from flowproof_cli.match.paths import GlobError, PathGlob
from flowproof_cli.match.patterns import BadPattern, compile_pattern
from flowproof_cli.match.presets import NormalizeEntry, preset_names
from flowproof_cli.quoting import closest_name, odd_note, skeleton, unmasked
from flowproof_cli.spec.fields import listed
from flowproof_cli.spec.problems import spec_problem


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


def _check_glob(text: str, at: tuple[str | int, ...]) -> None:
    try:
        PathGlob.parse(text)
    except GlobError as exc:
        raise spec_problem(
            f"{exc}. Fix: write a dotted path over the canonical request as the trace stores "
            "it, e.g. `metadata.user_id` or `input.*.id` (`*` = any key or index)",
            at,
        ) from None


class NormalizeSpec(_Model):
    """One regex span rewritten on both sides before matching."""

    pattern: str = Field(min_length=1, description="A Python regular expression.")
    replace: str = Field(description="What each match becomes (`\\1` refers to a group).")
    at: str | None = Field(
        default=None,
        description="Path glob: only strings at or below it (default: every string value).",
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            compile_pattern(pattern)
        except BadPattern as exc:
            raise spec_problem(
                f"`pattern` is not a valid regular expression: {exc}. Fix: correct it (in "
                "YAML, single quotes keep backslashes as written: '\\d{4}')"
            ) from None
        return pattern

    @field_validator("at")
    @classmethod
    def _at_is_a_glob(cls, at: str | None) -> str | None:
        if at is not None:
            _check_glob(at, ())
        return at


class MatchSpec(_Model):
    """`match:`: presets, ignored paths, normalized spans, matcher addon scripts."""

    presets: list[str] = listed("Built-in named rule sets (`flowproof match show`).")
    ignore: list[str] = listed(
        "Dotted paths dropped from both sides before matching; `*` = any key/index."
    )
    normalize: list[NormalizeSpec] = listed("Regex spans rewritten on both sides before matching.")
    addons: list[str] = listed(
        "mitmproxy addon scripts defining flowproof_normalize; relative to this file."
    )
    relocate: bool | None = Field(
        default=None,
        description="Store the run's cwd and HOME as {cwd}/{home} (presets turn it on).",
    )

    @field_validator("presets")
    @classmethod
    def _known_presets(cls, presets: list[str]) -> list[str]:
        known = preset_names()
        for index, name in enumerate(presets):
            if name not in known:
                close = closest_name(name, known, cutoff=0.5)
                hint = f" Did you mean `{close}`?" if close else ""
                odd = odd_note(name, close or skeleton(name))
                raise spec_problem(
                    f"unknown match preset `{unmasked(name)}`{odd}.{hint} Fix: use one of "
                    f"{', '.join(known)} "
                    "(`flowproof match show NAME` prints one)",
                    (index,),
                )
        return presets

    @field_validator("ignore")
    @classmethod
    def _globs(cls, paths: list[str]) -> list[str]:
        for index, path in enumerate(paths):
            _check_glob(path, (index,))
        return paths

    @field_validator("addons")
    @classmethod
    def _script_paths(cls, paths: list[str]) -> list[str]:
        for index, path in enumerate(paths):
            if not path.strip():
                raise spec_problem(
                    "an addon path is empty. Fix: name a Python file, e.g. "
                    "`matchers/strip_session.py`",
                    (index,),
                )
        return paths

    _declared_at: list[str] = PrivateAttr(default_factory=list)  # FILE:LINE per normalize

    @model_validator(mode="after")
    def _where_declared(self, info: ValidationInfo) -> Self:
        """Each normalize entry's `FILE:LINE`, from the loader's context (none in code)."""
        context = info.context if isinstance(info.context, dict) else {}
        source = context.get("source_path")
        if source is not None:
            lines = context.get("normalize_lines") or []
            self._declared_at = [f"{source}:{line}" for line in lines]
        return self

    def declared(self, base_dir: Path, origin: str) -> Declared:
        """The block as run-time data, its scripts resolved against `base_dir`."""
        where = self._declared_at + [None] * (len(self.normalize) - len(self._declared_at))
        return Declared(
            origin=origin,
            presets=tuple(self.presets),
            ignore=tuple(self.ignore),
            normalize=tuple(
                NormalizeEntry(entry.pattern, entry.replace, entry.at, at)
                for entry, at in zip(self.normalize, where, strict=False)
            ),
            addons=tuple(str((base_dir / path).resolve()) for path in self.addons),
            relocate=self.relocate,
        )
