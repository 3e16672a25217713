"""Built-in named rule sets: data files in `presets/`, one per agent (or generic concern).

A preset is YAML with `description`, optional `relocate: true`, `ignore:` paths and
`normalize:` rules, exactly the spec's `match:` shape. A preset for one agent also names it:
`agent:` is the product token its requests carry in their User-Agent (`claude-cli`), and
`versions_tested:` the releases whose requests its rules were proven on, so a user can tell
whether the preset knows the version they run. `flowproof match show NAME` prints one.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flowproof_cli.errors import ConfigError
from flowproof_cli.match.paths import GlobError, PathGlob
from flowproof_cli.match.patterns import BadPattern, compile_pattern

_FOLDER = Path(__file__).with_name("presets")
_KEYS = {"description", "agent", "versions_tested", "relocate", "ignore", "normalize"}
#: A product token of a User-Agent (RFC 9110 `token`), and a version as releases name one.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]*")


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
    #: The product token of the agent's User-Agent (`claude-cli`); None: a generic preset.
    agent: str | None = None
    #: The agent's releases the preset's rules were proven on, as the agent numbers them.
    versions_tested: tuple[str, ...] = ()

    def header(self) -> str | None:
        """What `match show` says first of an agent's preset: which agent, which versions."""
        if self.agent is None:
            return None
        versions = ", ".join(self.versions_tested) or "none named"
        return f"# preset {self.name}: agent {self.agent}; versions tested: {versions}"


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
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(sorted(unknown))}")
    agent, versions = _agent(data.get("agent"), where), _versions(data, where)
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
        agent=agent,
        versions_tested=versions,
    )


def _agent(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise ConfigError(
            f"{where}: `agent` is {value!r}, not a product token. Fix: write the name the "
            "agent's User-Agent starts with, before its `/` (`claude-cli` for "
            "`claude-cli/2.1.332 (external, cli)`)"
        )
    return value


def _versions(data: dict[str, Any], where: str) -> tuple[str, ...]:
    value = data.get("versions_tested")
    if value is None:
        return ()
    if "agent" not in data:
        raise ConfigError(
            f"{where}: `versions_tested` names releases, but of no agent. Fix: add `agent:`"
        )
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: `versions_tested` must be a list of versions")
    for version in value:
        if not isinstance(version, str) or not _VERSION.fullmatch(version):
            raise ConfigError(
                f"{where}: `versions_tested` holds {version!r}, not a version. Fix: write each "
                'as the agent numbers it, quoted ("2.1.332"): YAML reads 2.10 as the number 2.1'
            )
    return tuple(value)
