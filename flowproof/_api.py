"""`run_flow` and `FlowRun`: one flow's verdict and its trajectory, for custom assertions.

The trajectory is read from the trace the verdict judged: the trace replayed, or in record
mode the trace written (or the candidate waiting for review). A replay reaches its
assertions only when every recorded turn was served, so for a passing or an assertion-failed
replay this is exactly what the agent did; after a divergence it is what was recorded, and
`divergence` says where the run left it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowproof_cli.mode import Mode
from flowproof_cli.trajectory import ToolCall, Trajectory
from flowproof_cli.verdict import FlowResult

if TYPE_CHECKING:
    from flowproof_cli.runner.job import FlowJob


@dataclass(frozen=True)
class McpCall:
    """One MCP request the agent made, as recorded: its server, method, and for
    `tools/call` the tool and its arguments."""

    server: str
    method: str
    params: dict[str, Any] | None
    result: Any = None
    error: Any = None
    mocked: bool = False

    @property
    def tool(self) -> str | None:
        params = self.params or {}
        return str(params["name"]) if self.method == "tools/call" and "name" in params else None

    @property
    def arguments(self) -> dict[str, Any]:
        arguments = (self.params or {}).get("arguments")
        return dict(arguments) if isinstance(arguments, dict) else {}


@dataclass
class FlowRun:
    """A flow's verdict (`result`, a FlowResult) and what the agent did."""

    result: FlowResult
    trajectory: Trajectory = field(default_factory=Trajectory)
    mcp_calls: list[McpCall] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.result.passed and self.result.skipped is None

    @property
    def status(self) -> str:
        """passed, failed, error or skipped."""
        return self.result.status

    @property
    def failures(self) -> list[str]:
        return self.result.failure_texts

    @property
    def error(self) -> str | None:
        return self.result.error

    @property
    def skipped(self) -> str | None:
        return self.result.skipped

    @property
    def divergence(self) -> dict[str, Any] | None:
        return self.result.divergence

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Every tool call the model asked for, in recorded order."""
        return self.trajectory.tool_calls

    @property
    def reply(self) -> str | None:
        """The main conversation's final reply; None when it ends in a tool call."""
        return self.trajectory.reply

    def calls(self, name: str) -> list[ToolCall]:
        """The tool calls named `name`, in order."""
        return [call for call in self.tool_calls if call.name == name]


def run_flow(
    path: str | os.PathLike[str],
    *,
    record: bool = False,
    trace: str | os.PathLike[str] | None = None,
    timeout_s: float | None = None,
    environ: Mapping[str, str] | None = None,
    keep_going: bool = False,
) -> FlowRun:
    """Replay (or with `record=True` record) one spec, as `flowproof run SPEC` does
    (`keep_going=True` as `flowproof run --keep-going`).

    A flow that cannot run (bad spec, no trace, a broken suite) raises FlowproofError with
    the message the CLI prints. A re-record whose trajectory changed is never approved
    here: it waits beside the trace as a candidate, and the run fails saying how to accept.
    """
    from flowproof_cli.runner.parallel import execute  # noqa: PLC0415

    job = plan_job(
        Path(path),
        record=record,
        trace=trace,
        timeout_s=timeout_s,
        environ=environ,
        keep_going=keep_going,
    )
    result = execute(job)
    settle(result)
    return from_result(result)


def plan_job(
    path: Path,
    *,
    record: bool = False,
    trace: str | os.PathLike[str] | None = None,
    timeout_s: float | None = None,
    environ: Mapping[str, str] | None = None,
    in_directory: bool = False,
    keep_going: bool = False,
) -> FlowJob:
    from flowproof_cli.runner.job import plan_jobs  # noqa: PLC0415

    (job,) = plan_jobs(
        [path],
        mode=Mode.RECORD if record else Mode.REPLAY,
        environ=os.environ if environ is None else environ,
        timeout_s=timeout_s,
        trace_path=Path(trace) if trace is not None else None,
        in_directory=in_directory,
        keep_going=keep_going,
    )
    return job


def settle(result: FlowResult) -> None:
    """A record's candidate, settled as `flowproof record` does with nobody to ask: it
    stays beside the trace and the flow fails, naming how to accept it. A recording that
    needs no review replaces the trace."""
    from flowproof_cli.runner.rerecord import commit, discard, review  # noqa: PLC0415

    try:
        review([result], yes=False, ask=None, echo=None)
        commit([result])
    finally:
        discard([result])


def from_result(result: FlowResult) -> FlowRun:
    """The verdict with the trajectory of the trace it judged (none for a skip)."""
    source = _judged_trace(result)
    if source is None:
        return FlowRun(result)
    from flowproof_cli import trace as traces  # noqa: PLC0415
    from flowproof_cli.evidence.trace_view import trajectory_of, turn_views  # noqa: PLC0415

    recorded = traces.load(source)
    calls = [
        McpCall(
            server=server,
            method=call.method,
            params=call.params,
            result=call.result,
            error=call.error,
            mocked=call.mocked,
        )
        for server, lane in sorted(recorded.mcp.items())
        for call in lane.calls
    ]
    return FlowRun(result, trajectory_of(turn_views(recorded, str(source))), calls)


def missing_traces(root: str | os.PathLike[str]) -> list[Path]:
    """The specs below root (as a directory run finds them) with no trace beside them: what a
    replay would skip. Reads no spec and starts nothing, so a CI job can run it first."""
    from flowproof_cli.runner.discovery import discover_specs  # noqa: PLC0415
    from flowproof_cli.trace.storage import trace_path_for  # noqa: PLC0415

    return [spec for spec in discover_specs(Path(root)) if not trace_path_for(spec).exists()]


def _judged_trace(result: FlowResult) -> Path | None:
    if result.skipped is not None or result.error is not None:
        return None
    if result.mode == Mode.RECORD.value:
        if result.trace_written:
            return result.trace_path
        return result.candidate_path
    return result.trace_path if result.trace_path.exists() else None
