"""Declared match rules: what a flow relaxes of strict body matching, applied identically to
the live request and to the recorded one, and counted so every run can say what it relaxed.

Order: relocation first (paths become `{cwd}`/`{home}`), then `ignore` paths, then
`normalize` spans, then matcher addons, each on the result of the one before.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowproof_cli.match.paths import PathGlob, map_strings
from flowproof_cli.match.patterns import PatternBudgetExceeded, within_budget
from flowproof_cli.match.presets import Preset
from flowproof_cli.match.relocate import Relocation
from flowproof_cli.match.user_code import HOOK, MatcherAddonError, ScriptCalls

JSON = dict[str, Any]
Normalizer = Callable[[JSON, str], JSON]


class Rule(Protocol):
    """One relaxation: its report name, and how it rewrites a request (with a count of the
    fields it touched)."""

    @property
    def name(self) -> str: ...

    @property
    def origin(self) -> str: ...

    def apply(self, protocol: str, request: JSON) -> tuple[JSON, int]: ...

    def snapshot(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class IgnoreRule:
    """A path glob dropped from the request before matching."""

    glob: PathGlob
    origin: str = "spec"

    def apply(self, protocol: str, request: JSON) -> tuple[JSON, int]:
        return self.glob.drop(request)

    def snapshot(self) -> dict[str, Any]:
        return {"ignore": str(self.glob), "from": self.origin}

    @property
    def name(self) -> str:
        return f"ignore {self.glob}"


@dataclass(frozen=True)
class NormalizeRule:
    """A regex span rewritten in every string at or below `at`, under a CPU-time budget."""

    pattern: re.Pattern[str]
    replace: str
    at: PathGlob | None = None
    origin: str = "spec"
    declared: str | None = None  # `FILE:LINE` of the entry, when it was read from a file

    @property
    def name(self) -> str:
        where = f" at {self.at}" if self.at is not None else ""
        pattern = self.pattern.pattern
        shown = pattern if len(pattern) <= 48 else pattern[:45] + "..."
        return f"normalize /{shown}/{where}"

    @property
    def where(self) -> str:
        """Where the pattern was declared, as a budget message says it."""
        if self.declared is not None:
            return f"declared at {self.declared}"
        if self.origin in ("spec", "suite"):
            return f"from the {self.origin}'s match block"
        return f"from {self.origin}"

    def apply(self, protocol: str, request: JSON) -> tuple[JSON, int]:
        """Raises PatternBudgetExceeded when the pattern runs past its budget."""
        pattern, replace = self.pattern, self.replace
        return within_budget(
            lambda: map_strings(request, lambda text: pattern.sub(replace, text), self.at),
            kind="normalize pattern",
            pattern=pattern.pattern,
            declared=self.where,
            subject="a request",
        )

    def snapshot(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"pattern": self.pattern.pattern, "replace": self.replace}
        if self.at is not None:
            entry["at"] = str(self.at)
        return {"normalize": entry, "from": self.origin}


def _leaf_changes(before: Any, after: Any) -> int:
    """How many leaves differ between two JSON values (a cheap count for reports)."""
    if type(before) is not type(after):
        return 1
    if isinstance(before, dict):
        keys = before.keys() | after.keys()
        return sum(_leaf_changes(before.get(key), after.get(key)) for key in keys)
    if isinstance(before, list):
        longest = max(len(before), len(after))
        pairs = zip(before, after, strict=False)
        return sum(_leaf_changes(a, b) for a, b in pairs) + longest - min(len(before), len(after))
    return int(before != after)


@dataclass(frozen=True)
class AddonRule:
    """A mitmproxy addon object defining `flowproof_normalize(request, protocol)`, called in
    its script's own thread within the budget (`calls`, match/user_code.py): never on the
    caller's thread, so `apply` must not be called on the event loop's (it waits)."""

    addon_name: str  # its class name: the rule's name in every report
    normalize: Normalizer
    origin: str = "spec"
    calls: ScriptCalls = field(default_factory=lambda: ScriptCalls(None), compare=False, repr=False)

    @property
    def name(self) -> str:
        return f"addon {self.addon_name}"

    def apply(self, protocol: str, request: JSON) -> tuple[JSON, int]:
        live = copy.deepcopy(request)
        result = self.calls.call(self.addon_name, HOOK, self._compared, request, live, protocol)
        if isinstance(result, str):
            raise MatcherAddonError(
                f"the matcher addon {self.addon_name} returned {result}, not the "
                "request mapping. Fix: make flowproof_normalize return the (changed) request"
            )
        return result

    def _compared(self, request: JSON, live: JSON, protocol: str) -> tuple[JSON, int] | str:
        """In the script's thread, within the budget: the hook's result and what it changed
        (comparing may run the returned objects' own code), or the type it wrongly returned."""
        result = self.normalize(live, protocol)
        if not isinstance(result, dict):
            return type(result).__name__
        return result, _leaf_changes(request, result)

    def snapshot(self) -> dict[str, Any]:
        return {"addon": self.addon_name, "from": self.origin}


@dataclass
class RuleUsage:
    name: str
    origin: str
    fields: int = 0
    turns: int = 0
    stopped: bool = False  # ran past its budget: not "unused", whatever it changed

    @property
    def unused(self) -> bool:
        return self.fields == 0 and not self.stopped

    def to_json(self) -> dict[str, Any]:
        counts = {"fields": self.fields, "turns": self.turns, "unused": self.unused}
        return {"rule": self.name, "origin": self.origin} | counts


@dataclass
class MatchRules:
    """The rules in force for one flow. Empty rules change nothing and report nothing."""

    rules: list[Rule] = field(default_factory=list)
    relocation: Relocation | None = None
    relocation_origin: str = "spec"
    #: The presets in force (their rules are among `rules`): the agents they name are
    #: whose version a request records, and whose untested versions a run points out.
    presets: tuple[Preset, ...] = ()
    usage: list[RuleUsage] = field(init=False)
    relocated: RuleUsage = field(init=False)
    turns_relaxed: int = field(init=False, default=0)  # this run's requests any rule changed
    #: A pattern that ran past its budget: every later request fails with it at once, so a
    #: stuck pattern costs its budget once, not once per retry of the agent.
    exceeded: PatternBudgetExceeded | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.usage = [RuleUsage(rule.name, rule.origin) for rule in self.rules]
        where = self.relocation.describe() if self.relocation else ""
        self.relocated = RuleUsage(f"relocate ({where})", self.relocation_origin)

    @property
    def active(self) -> bool:
        return bool(self.rules) or self.relocation is not None

    @property
    def agent_tokens(self) -> tuple[str, ...]:
        """The User-Agent product tokens the presets in force name."""
        return tuple(preset.agent for preset in self.presets if preset.agent is not None)

    @property
    def runs_user_code(self) -> bool:
        """A matcher addon is among the rules: applying them waits on its script's thread."""
        return any(isinstance(rule, AddonRule) for rule in self.rules)

    def matched(
        self, protocol: str, request: JSON, *, count: bool = True, subject: str | None = None
    ) -> JSON:
        """The request as matched and stored. `count` is False for the recorded side, so
        the report counts what the rules did to this run's own requests. Raises
        PatternBudgetExceeded, naming `subject` (which request), for a pattern past its
        budget, then for every later request."""
        if self.exceeded is not None:
            raise self.exceeded
        if not self.active:
            return request
        try:
            return self._apply(protocol, request, count)
        except PatternBudgetExceeded as exc:
            self.exceeded = exc.restated(subject=subject)
            raise self.exceeded from None

    def _apply(self, protocol: str, request: JSON, count: bool) -> JSON:
        touched = False
        if self.relocation is not None:
            request, changed = self.relocation.to_placeholders(request)
            if count and changed:
                self.relocated.fields += changed
                self.relocated.turns += 1
                touched = True
        for rule, usage in zip(self.rules, self.usage, strict=True):
            try:
                request, changed = rule.apply(protocol, request)
            except PatternBudgetExceeded:
                usage.stopped = True
                raise
            if count and changed:
                usage.fields += changed
                usage.turns += 1
                touched = True
        self.turns_relaxed += int(touched)
        return request

    def stored_response(self, response: Any) -> Any:
        """A response as the trace keeps it (live paths as placeholders)."""
        if self.relocation is None:
            return response
        return self.relocation.to_placeholders(response)[0]

    def live_response(self, response: Any) -> Any:
        """A recorded response as this run serves it (placeholders as live paths)."""
        if self.relocation is None:
            return response
        return self.relocation.to_live(response)

    def snapshot(self) -> list[dict[str, Any]]:
        """The rules as the trace records them (like mocks): what was in force."""
        entries: list[dict[str, Any]] = (
            [{"relocate": True, "from": self.relocation_origin}] if self.relocation else []
        )
        entries.extend(rule.snapshot() for rule in self.rules)
        return entries

    def report(self) -> list[RuleUsage]:
        """Every rule with what it changed in this run (relocation first when on)."""
        return ([self.relocated] if self.relocation else []) + list(self.usage)


def summarize(rules: MatchRules) -> list[str]:
    """Verdict notes: what was relaxed (rule by rule), and which rules matched nothing in the
    whole run. No rules, no notes."""
    report = rules.report()
    used = [usage for usage in report if usage.fields]
    unused = [usage for usage in report if usage.unused]
    notes: list[str] = []
    if used:
        fields = sum(usage.fields for usage in used)
        lines = [
            f"match rules relaxed {fields} field(s) on {rules.turns_relaxed} request(s):",
            *(
                f"  {usage.name} ({usage.origin}): {usage.fields} field(s) on "
                f"{usage.turns} request(s)"
                for usage in used
            ),
        ]
        notes.append("\n".join(lines))
    if unused:
        lines = ["match rules unused (they matched nothing in this run):"]
        lines.extend(f"  {usage.name} ({usage.origin})" for usage in unused)
        notes.append("\n".join(lines))
    return notes
