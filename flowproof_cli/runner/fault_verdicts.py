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
from typing import TYPE_CHECKING, Any

from flowproof_cli.errors import TraceError
from flowproof_cli.faults.plan import Fault, faults_to_document
from flowproof_cli.verdict import Failure

if TYPE_CHECKING:  # annotations only: `check` imports this module without the proxy
    from flowproof_cli.faults.model_calls import ModelCalls
    from flowproof_cli.runner.mcp_servers import McpVerdict


def faults_moved(
    recorded: tuple[Fault, ...], declared: tuple[Fault, ...]
) -> tuple[str, str] | None:
    """The recorded and the declared faults as labels (`none` for no fault), when the two
    differ; None when the trace was recorded with exactly these. `check` and the replay
    word it each their way."""
    if faults_to_document(recorded) == faults_to_document(declared):
        return None
    return (
        "; ".join(fault.label for fault in recorded) or "none",
        "; ".join(fault.label for fault in declared) or "none",
    )


def fault_outcomes(model: ModelCalls, mcp: McpVerdict) -> tuple[dict[str, int], dict[str, str]]:
    """What the model boundary and the MCP servers did with the flow's faults: attempts
    faulted, and why not, by fault label."""
    return {**model.applied, **mcp.applied}, {**model.not_applicable, **mcp.not_applicable}


def check_recorded_faults(
    faults: tuple[Fault, ...], recorded: tuple[Fault, ...], trace_path: Path, record: str
) -> None:
    """TraceError unless the trace was recorded with exactly these faults."""
    moved = faults_moved(recorded, faults)
    if moved is None:
        return
    trace_side, spec_side = moved
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
