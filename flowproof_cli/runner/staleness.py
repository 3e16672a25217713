"""Whether a flow's trace still fits its spec, read from the files alone (`flowproof check`).

A replay judges a trace recorded under other mocks, faults or match rules than the spec now
declares (or a one-turn trace of what is now a conversation) only once the agent has run:
it refuses it (exit 2), or fails with a note saying what moved. This module finds the same
differences with no proxy and no agent, comparing exactly what the replay compares
(`runner/flow.py`, `runner/judge.py`): the trace's `mocks:` with the spec's mocked tools,
its `faults:` with `spec.fault_plan` (`faults_to_document`, as `check_recorded_faults`
does), its `match:` snapshot with the rules the suite and the spec build now, and its
`conversation:` section with the spec's `user:` steps.

Matcher addon scripts are user code run through mitmproxy's loader: they are not loaded
here, so their rules (`{"addon": ...}` entries) are left out of the comparison on both
sides; a replay still compares them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowproof_cli import trace as traces
from flowproof_cli.faults.plan import Fault
from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.runner.fault_verdicts import faults_moved
from flowproof_cli.spec import FlowSpec
from flowproof_cli.trace.storage import SPEC_SUFFIX, TRACE_SUFFIX


@dataclass(frozen=True)
class Staleness:
    """One flow's trace against its spec: what differs (empty: current)."""

    spec_path: Path
    trace_path: Path
    differences: list[str] = field(default_factory=list)
    #: What differs without making the trace stale: a preset's rules that changed since
    #: recording (the replay applies today's preset to the recorded requests).
    notes: list[str] = field(default_factory=list)

    @property
    def fix(self) -> str:
        return f"flowproof record {self.spec_path}"


def spec_path_of_trace(trace_path: Path) -> Path:
    """`x.trace.yaml` -> `x.flow.yaml` beside it: the spec a changed trace is checked by."""
    stem = trace_path.name.removesuffix(TRACE_SUFFIX)
    return trace_path.with_name(stem + SPEC_SUFFIX)


def match_blocks(spec: FlowSpec, suite_match: Sequence[Declared], cwd: Path) -> list[Declared]:
    """The suite's `match:` blocks, then the flow's own: the blocks a run builds its rules
    from (`runner/flow.py`), each without its matcher addon scripts."""
    own = [spec.match.declared(cwd, "spec")] if spec.match is not None else []
    return [dataclasses.replace(block, addons=()) for block in (*suite_match, *own)]


def staleness(
    spec: FlowSpec, spec_path: Path, trace_path: Path, suite_match: Sequence[Declared] = ()
) -> Staleness:
    """What differs between the spec and its trace. Raises the trace's own load error
    (TraceError, naming its line) and a match rule's (ConfigError) as a replay would."""
    if not trace_path.exists():
        return Staleness(spec_path, trace_path, [missing_trace(trace_path)])
    trace = traces.load(trace_path)
    recorded = [entry for entry in trace.match if "addon" not in entry]
    now = _match_now(spec, spec_path, suite_match)
    differences = [
        *mocks_difference(trace.mocks, dict(spec.mocks)),
        *faults_difference(trace.faults, spec.fault_plan),
        *match_difference(_declared_rules(recorded), _declared_rules(now)),
        *turns_difference(spec.is_conversation, trace.conversation is not None),
    ]
    return Staleness(spec_path, trace_path, differences, preset_drift(recorded, now))


def _is_preset_rule(entry: dict[str, Any]) -> bool:
    return str(entry.get("from", "")).startswith("preset ")


def _declared_rules(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules a spec or suite declares itself, and which presets they name: the rules
    inside a preset are flowproof's, and change with it."""
    kept, presets = [], []
    for entry in entries:
        if "addon" in entry:
            continue
        if not _is_preset_rule(entry):
            kept.append(entry)
        elif entry["from"] not in presets:
            presets.append(entry["from"])
    return kept + [{"from": preset} for preset in presets]


def preset_drift(recorded: list[dict[str, Any]], now: list[dict[str, Any]]) -> list[str]:
    """A preset whose rules changed since the trace was recorded: not stale (the replay
    applies today's rules to the recorded requests, so it still passes), but worth a
    re-record, which stores the requests as today's rules match them."""
    named_both = {str(e["from"]) for e in recorded if _is_preset_rule(e)} & {
        str(e["from"]) for e in now if _is_preset_rule(e)
    }
    changed = sorted(
        {
            str(entry["from"])
            for entry in [*recorded, *now]
            if entry.get("from") in named_both and (entry in recorded) != (entry in now)
        }
    )
    return [
        f"the {preset}'s rules changed since it was recorded; the replay applies today's, "
        "so it still passes (re-record to store the requests as they match now)"
        for preset in changed
    ]


def _match_now(
    spec: FlowSpec, spec_path: Path, suite_match: Sequence[Declared]
) -> list[dict[str, Any]]:
    """The `match:` snapshot a record of the spec would write now (addon rules aside)."""
    blocks = match_blocks(spec, suite_match, spec_path.parent)
    if not blocks:
        return []
    rules, _ = build_rules(blocks, cwd=spec_path.parent, home=None)
    return rules.snapshot()


def missing_trace(trace_path: Path) -> str:
    if os.path.islink(trace_path):
        return f"its trace {trace_path} is a symbolic link to nothing"
    return f"no trace at {trace_path}"


def mocks_difference(recorded: dict[str, Any], declared: dict[str, Any]) -> list[str]:
    """The tools whose mocked result differs from the one recorded (an added or removed
    mock counts), as the replay's note compares them."""
    if recorded == declared:
        return []
    changed = sorted(
        name
        for name in recorded.keys() | declared.keys()
        if name not in recorded or name not in declared or recorded[name] != declared[name]
    )
    return [f"its tools' mocks differ from the recorded ones ({', '.join(changed)})"]


def faults_difference(recorded: tuple[Fault, ...], declared: tuple[Fault, ...]) -> list[str]:
    moved = faults_moved(recorded, declared)
    if moved is None:
        return []
    trace_side, spec_side = moved
    return [f"its faults differ from the recorded ones (recorded: {trace_side}; now: {spec_side})"]


def match_difference(recorded: list[dict[str, Any]], now: list[dict[str, Any]]) -> list[str]:
    """The match rules in force differ from the trace's snapshot (addon rules aside)."""
    recorded = [entry for entry in recorded if "addon" not in entry]
    if recorded == now:
        return []
    gone = [_rule_name(entry) for entry in recorded if entry not in now]
    added = [_rule_name(entry) for entry in now if entry not in recorded]
    moved = f"recorded only: {', '.join(gone) or 'none'}; now only: {', '.join(added) or 'none'}"
    if not gone and not added:
        moved = "the same rules in another order"
    return [f"the match rules it runs with differ from the recorded ones ({moved})"]


def _rule_name(entry: dict[str, Any]) -> str:
    """A snapshot entry as a rule's report names it: `ignore PATH (origin)`."""
    origin = entry.get("from", "?")
    if set(entry) == {"from"}:  # a preset, named as a whole (`_declared_rules`)
        return str(origin)
    if "ignore" in entry:
        return f"ignore {entry['ignore']} ({origin})"
    if "normalize" in entry:
        normalize = entry["normalize"]
        at = f" at {normalize['at']}" if normalize.get("at") else ""
        return f"normalize /{normalize.get('pattern')}/{at} ({origin})"
    if entry.get("relocate"):
        return f"relocate ({origin})"
    return f"{entry} ({origin})"


def turns_difference(conversation: bool, recorded_conversation: bool) -> list[str]:
    """A conversation spec against a one-turn trace, or the other way round."""
    if conversation and not recorded_conversation:
        return ["it is a conversation (it has `user:` steps) but was recorded as a one-turn flow"]
    if not conversation and recorded_conversation:
        return ["it is a one-turn flow (no `user:` steps) but was recorded as a conversation"]
    return []
