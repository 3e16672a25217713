"""Built-in named rule sets: data files in `presets/`, one per agent (or generic concern).

A preset is YAML with `description`, optional `relocate: true`, `ignore:` paths and
`normalize:` rules, exactly the spec's `match:` shape. `flowproof match show NAME` prints one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flowproof_cli.errors import ConfigError
from flowproof_cli.match.paths import GlobError, PathGlob
from flowproof_cli.match.patterns import BadPattern, compile_pattern

_FOLDER = Path(__file__).with_name("presets")


@dataclass(frozen=True)
class NormalizeEntry:
    pattern: str
    replace: str
    at: str | None = None
    declared: str | None = None  # `FILE:LINE` of a spec's or a suite's entry (messages only)


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    relocate: bool
    ignore: tuple[str, ...]
    normalize: tuple[NormalizeEntry, ...]
    text: str  # the file as written, comments and all, for `match show`


def preset_names() -> list[str]:
    return sorted(entry.stem for entry in _FOLDER.glob("*.yaml"))


@functools.cache
def load_preset(name: str) -> Preset:
    """One preset by name; a broken preset file is flowproof's own defect, named as such."""
    if name not in preset_names():
        raise ConfigError(
            f"unknown match preset `{name}`. Fix: use one of {', '.join(preset_names())}"
        )
    text = (_FOLDER / f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    return _preset_from(name, data, text)


def _preset_from(name: str, data: Any, text: str) -> Preset:
    where = f"match preset `{name}`"
    if not isinstance(data, dict):
        raise ConfigError(f"{where} is not a mapping")
    unknown = set(data) - {
        "description",
        "agent",
        "versions_tested",
        "relocate",
        "ignore",
        "normalize",
    }
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(sorted(unknown))}")
    ignore = tuple(str(path) for path in data.get("ignore") or [])
    entries = []
    for raw in data.get("normalize") or []:
        entry = NormalizeEntry(str(raw["pattern"]), str(raw.get("replace", "")), raw.get("at"))
        entries.append(entry)
    try:
        for path in ignore:
            PathGlob.parse(path)
        for entry in entries:
            compile_pattern(entry.pattern)
            if entry.at is not None:
                PathGlob.parse(entry.at)
    except (GlobError, BadPattern) as exc:
        raise ConfigError(f"{where} has a bad rule: {exc}") from None
    return Preset(
        name=name,
        description=str(data.get("description", "")),
        relocate=bool(data.get("relocate", False)),
        ignore=ignore,
        normalize=tuple(entries),
        text=text,
    )
