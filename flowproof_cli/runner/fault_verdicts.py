"""What became of a flow's faults: its report (`FlowResult.faults`) and its failures.

A fault whose call never came fails the flow, naming the fault and its line: a spec that
says "the 5th call gets a 429" tests nothing when the agent makes four. So does a fault that
cannot apply to its call (a `stream:` fault on an answer that was not streamed). A replay
whose trace was recorded with other faults than the spec's cannot be judged at all (exit 2):
what the agent did after a fault is in the recording only for the fault it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flowproof_cli.errors import TraceError
from flowproof_cli.faults.plan import Fault, faults_to_document
from flowproof_cli.verdict import Failure


def check_recorded_faults(
    faults: tuple[Fault, ...], recorded: tuple[Fault, ...], trace_path: Path, record: str
) -> None:
    """TraceError unless the trace was recorded with exactly these faults."""
    if faults_to_document(faults) == faults_to_document(recorded):
        return
    spec_side = "; ".join(fault.label for fault in faults) or "none"
    trace_side = "; ".join(fault.label for fault in recorded) or "none"
    raise TraceError(
        f"{trace_path} was recorded with other faults than the spec's (recorded: "
        f"{trace_side}; the spec's: {spec_side}); what the agent did after a fault is "
        f"recorded only for the fault it got. Fix: re-record the flow with `{record}`"
    )


def fault_report(
    faults: tuple[Fault, ...], applied: Mapping[str, int], not_applicable: Mapping[str, str]
) -> list[dict[str, Any]]:
    """`FlowResult.faults`: each fault with the attempts it answered, or why it could not."""
    return [
        {
            "fault": fault.label,
            "line": fault.line,
            "applied": applied.get(fault.label, 0),
            "not_applicable": not_applicable.get(fault.label),
        }
        for fault in faults
    ]


def fault_failures(
    faults: tuple[Fault, ...],
    applied: Mapping[str, int],
    not_applicable: Mapping[str, str],
    calls: Mapping[str, int],
) -> list[Failure]:
    """A failure per fault that never applied (`calls`: how many calls each boundary saw,
    by `model` or MCP server name) or could not."""
    failures = []
    for fault in faults:
        why = not_applicable.get(fault.label)
        if why is not None:
            failures.append(
                Failure(f"the fault `{fault.label}` could not apply: {why}", fault.line)
            )
        elif fault.label not in applied:
            seen = calls.get(fault.at.server or "model", 0)
            kind = "tools/call request(s)" if fault.at.boundary == "mcp" else "model call(s)"
            failures.append(
                Failure(
                    f"the fault `{fault.label}` never applied: its call never came (the agent "
                    f"made {seen} distinct {kind} there). Fix: name a call the agent makes",
                    fault.line,
                )
            )
    return failures
