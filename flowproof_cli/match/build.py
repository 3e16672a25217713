"""From declared `match:` blocks (a suite's, then a flow's) to the rules one flow runs with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowproof_cli.errors import ConfigError
from flowproof_cli.match.addons import LoadedScript, load_matcher_script
from flowproof_cli.match.paths import PathGlob
from flowproof_cli.match.patterns import BadPattern, compile_pattern
from flowproof_cli.match.presets import NormalizeEntry, Preset, load_preset
from flowproof_cli.match.relocate import Relocation
from flowproof_cli.match.rules import IgnoreRule, MatchRules, NormalizeRule, Rule
from flowproof_cli.match.user_code import Budget


@dataclass(frozen=True)
class Declared:
    """One `match:` block as written, its addon paths made absolute. Plain data (JSON both
    ways) so a suite's block reaches a worker process."""

    origin: str  # "suite" or "spec": shown with every rule in reports
    presets: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    normalize: tuple[NormalizeEntry, ...] = ()
    addons: tuple[str, ...] = ()
    relocate: bool | None = None  # None: on when a preset asks for it

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "presets": list(self.presets),
            "ignore": list(self.ignore),
            "normalize": [
                {"pattern": e.pattern, "replace": e.replace, "at": e.at, "declared": e.declared}
                for e in self.normalize
            ],
            "addons": list(self.addons),
            "relocate": self.relocate,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Declared:
        return cls(
            origin=str(data["origin"]),
            presets=tuple(data.get("presets") or ()),
            ignore=tuple(data.get("ignore") or ()),
            normalize=tuple(
                NormalizeEntry(e["pattern"], e["replace"], e.get("at"), e.get("declared"))
                for e in data.get("normalize") or ()
            ),
            addons=tuple(data.get("addons") or ()),
            relocate=data.get("relocate"),
        )


def _normalize_rule(
    entry: NormalizeEntry, origin: str, declared: str | None = None
) -> NormalizeRule:
    at = PathGlob.parse(entry.at) if entry.at is not None else None
    where = declared if declared is not None else entry.declared
    return NormalizeRule(compile_pattern(entry.pattern), entry.replace, at, origin, where)


def _rules_of(block: Declared) -> tuple[list[Rule], str | None]:
    """The block's rules, presets first, and the first preset asking for relocation."""
    rules: list[Rule] = []
    relocate: str | None = None
    for name in block.presets:
        preset = load_preset(name)
        origin = f"preset {name}"
        if preset.relocate and relocate is None:
            relocate = name
        rules.extend(IgnoreRule(PathGlob.parse(path), origin) for path in preset.ignore)
        rules.extend(_normalize_rule(entry, origin) for entry in preset.normalize)
    rules.extend(IgnoreRule(PathGlob.parse(path), block.origin) for path in block.ignore)
    rules.extend(_normalize_rule(entry, block.origin) for entry in block.normalize)
    return rules, relocate


def build_rules(
    blocks: Sequence[Declared],
    *,
    cwd: Path,
    home: str | None,
    addon_budget: Budget | None = None,
) -> tuple[MatchRules, list[LoadedScript]]:
    """The rules in force and the matcher scripts they loaded (whose addon objects join the
    proxy), each script's calls within `addon_budget`. Raises ConfigError for a script
    that is missing or does not import (the ones loaded before it are closed)."""
    rules: list[Rule] = []
    scripts: list[LoadedScript] = []
    presets: dict[str, Preset] = {}
    relocate, origin = False, "spec"
    for block in blocks:
        presets.update((name, load_preset(name)) for name in block.presets)
        block_rules, wanting_preset = _rules_of(block)
        rules.extend(block_rules)
        if block.relocate is not None:
            relocate, origin = block.relocate, block.origin
        elif wanting_preset is not None and not relocate:
            relocate, origin = True, f"preset {wanting_preset}"
        for path in block.addons:
            try:
                loaded = load_matcher_script(Path(path), block.origin, addon_budget)
            except BaseException:
                for script in scripts:  # their threads: the flow will not run
                    script.close()
                raise
            scripts.append(loaded)
            rules.extend(loaded.rules)
    relocation = Relocation(str(cwd.resolve()), home or "") if relocate else None
    return MatchRules(rules, relocation, origin, tuple(presets.values())), scripts


@dataclass(frozen=True)
class SnapshotRules:
    """The declarative rules a trace recorded under `match:` (ignore, normalize, relocation),
    rebuilt for a proxy that has no spec: stock mitmdump/mitmweb replaying the trace."""

    rules: list[Rule]
    relocate: bool
    addons: list[str]  # matcher addon class names: their scripts must be loaded with -s


def snapshot_rules(entries: Sequence[Mapping[str, Any]], source: str) -> SnapshotRules:
    """Raises ConfigError naming the trace for an entry this version cannot rebuild."""
    rules: list[Rule] = []
    relocate = False
    addons: list[str] = []
    for entry in entries:
        origin = str(entry.get("from", "trace"))
        try:
            if "ignore" in entry:
                rules.append(IgnoreRule(PathGlob.parse(str(entry["ignore"])), origin))
            elif "normalize" in entry:
                spec = entry["normalize"]
                at = spec.get("at")
                entry_of = NormalizeEntry(spec["pattern"], spec["replace"], at)
                declared = f"{source} (the trace's `match:` snapshot, from {origin})"
                rules.append(_normalize_rule(entry_of, origin, declared))
            elif entry.get("relocate"):
                relocate = True
            elif "addon" in entry:
                addons.append(str(entry["addon"]))
            else:
                raise ValueError("no ignore, normalize, relocate or addon key")
        except (KeyError, TypeError, ValueError, AttributeError, BadPattern) as exc:
            raise ConfigError(
                f"{source}: match rule {dict(entry)!r} cannot be rebuilt ({exc}). Fix: "
                "re-record the trace with this version of flowproof"
            ) from None
    return SnapshotRules(rules, relocate, addons)
