"""`flowproof chaos`: each passing flow replayed once per (call x fault kind), one fault at a
time, offline, and what the agent did with it.

A cell is a plain replay with ONE fault injected on top of the spec's own (`FlowJob.injected`),
so it costs what a replay costs: every cell of every flow runs in this process's one event
loop, on its one proxy, at most `-j N` at once, exactly as `flowproof run DIR -j N` runs
flows. A flow gets cells only once its plain replay (the baseline) passed: a flow that fails
without a fault says nothing about faults.

What a cell's outcome can prove is in docs/chaos.md: `survived` means the agent retried the
identical request and the flow still passed; `diverged` means it did something the recording
does not have, which only a recording made with that fault can judge.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowproof_cli import trace as traces
from flowproof_cli.errors import FlowproofError, Terminated
from flowproof_cli.faults.plan import ANSWER, CRASH, CUT, MCP_ERROR, RESET, CallAt, Fault
from flowproof_cli.runner import orphans
from flowproof_cli.runner.job import FlowJob, LazyHub, error_row, execute_async
from flowproof_cli.runner.termination import stopping_once_on_ctrl_c
from flowproof_cli.spec import load_spec
from flowproof_cli.verdict import FlowResult

#: The model kinds a sweep can inject, as `--kinds` names them, and the MCP ones.
MODEL_KINDS = ("429", "500", "503", "529", "reset", "cut")
MCP_KINDS = ("mcp-error", "mcp-crash")
KINDS = (*MODEL_KINDS, *MCP_KINDS)
#: What an SDK is expected to absorb by retrying the identical request.
DEFAULT_KINDS = ("429", "500", "529", "reset", "cut")
#: A 429's retry-after: small, so a cell costs about what a replay costs.
RETRY_AFTER_S = 0.05
MCP_ERROR_VALUE = {"code": -32603, "message": "injected by flowproof chaos"}
#: A cell's default timeout: the spec's own, at most this (a hang costs this much).
CELL_TIMEOUT_CAP_S = 60.0

SURVIVED, DIVERGED, CRASHED, HUNG, WRONG, NOT_APPLICABLE = (
    "survived",
    "diverged",
    "crashed",
    "hung",
    "wrong",
    "n/a",
)
OUTCOMES = (SURVIVED, DIVERGED, CRASHED, HUNG, WRONG, NOT_APPLICABLE)
#: A flow whose plain replay did not pass (failed, error or skipped): it has no cells.
NOT_PASSING = "not-passing"
FAIL_ON = (*OUTCOMES, NOT_PASSING)
MARKS = {
    SURVIVED: "ok",
    DIVERGED: "DIV",
    CRASHED: "CRASH",
    HUNG: "HUNG",
    WRONG: "WRONG",
    NOT_APPLICABLE: "n/a",
}
LEGEND = (
    "ok survived, DIV diverged, CRASH crashed, HUNG hung (killed at the timeout), "
    "WRONG wrong (exit 0, the flow failed), n/a the fault could not apply, - not that kind of call"
)
#: Texts the drivers put in a failure when the agent or service ran out of time.
_TIMED_OUT = ("did not finish within", "did not answer within")
_STDERR_TAIL = "; its stderr ends with:"


def fault_for(kind: str, at: CallAt) -> Fault:
    """The one fault a cell of `kind` injects at `at`."""
    if kind == "429":
        return Fault(at, ANSWER, 429, retry_after=RETRY_AFTER_S)
    if kind in ("500", "503", "529"):
        return Fault(at, ANSWER, int(kind))
    if kind == "reset":
        return Fault(at, RESET)
    if kind == "cut":
        return Fault(at, CUT, 1)  # the stream ends after its first chunk
    if kind == "mcp-error":
        return Fault(at, MCP_ERROR, dict(MCP_ERROR_VALUE))
    if kind == "mcp-crash":
        return Fault(at, CRASH)
    raise ValueError(f"no chaos kind {kind!r}")


def positions(trace: traces.Trace) -> list[CallAt]:
    """The recording's calls a fault can hit: model calls 1..T (one per recorded turn: a
    retry is no new call), then each MCP server's `tools/call`s, servers by name."""
    model = [CallAt("model", number) for number in range(1, len(trace.turns) + 1)]
    mcp = [
        CallAt("mcp", number, server=name)
        for name, lane in sorted(trace.mcp.items())
        for number in range(1, sum(call.method == "tools/call" for call in lane.calls) + 1)
    ]
    return [*model, *mcp]


def column(at: CallAt) -> str:
    """A call's matrix header: `m3`, `notes#2`."""
    return f"{at.server}#{at.call}" if at.boundary == "mcp" else f"m{at.call}"


@dataclass(frozen=True)
class Cell:
    """One replay of the sweep: `fault` at its call; `skip` says why it is not run (n/a)."""

    at: CallAt
    kind: str
    fault: Fault
    skip: str | None = None


def faulted_calls(spec_faults: Sequence[Fault], trace: traces.Trace) -> set[CallAt]:
    """The calls the spec's own faults hit, as chaos names them (`turn K model call N` is
    the recording's N-th call made while conversation turn K was open)."""
    found = set()
    for fault in spec_faults:
        at = fault.at
        if at.boundary == "model" and at.turn is not None:
            in_turn = [
                n for n, turn in enumerate(trace.turns, 1) if turn.conversation_turn == at.turn
            ]
            if at.call > len(in_turn):
                continue  # a call the recording does not have: the replay says so
            at = CallAt("model", in_turn[at.call - 1])
        found.add(at)
    return found


def plan_cells(
    calls: Sequence[CallAt], kinds: Sequence[str], faulted: Collection[CallAt] = ()
) -> list[Cell]:
    """A cell per (kind, call) of its boundary, kinds in the order given. A call the spec
    already faults is not faulted twice: its cells are n/a."""
    cells = []
    for kind in kinds:
        boundary = "mcp" if kind in MCP_KINDS else "model"
        for at in calls:
            if at.boundary != boundary:
                continue
            skip = f"the spec's own fault is at {at}" if at in faulted else None
            cells.append(Cell(at, kind, fault_for(kind, at), skip))
    return cells


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    outcome: str
    detail: str
    duration_s: float = 0.0


def classify(result: FlowResult, fault: Fault, timeout_s: float | None) -> tuple[str, str]:
    """A cell's outcome and what to say about it, from its replay's result."""
    why = _not_applicable(result, fault)
    if why is not None:
        return NOT_APPLICABLE, why
    if result.passed:
        return (
            SURVIVED,
            f"{result.model_calls} model request(s) for {result.recorded_turns} call(s)",
        )
    if result.divergence:
        return DIVERGED, str(result.divergence.get("summary") or "the request changed")
    said = _first_line(result.error or (result.failures[0].text if result.failures else ""))
    if result.error is None and _timed_out(result, timeout_s):
        return HUNG, said
    if result.error is not None or result.agent_exit_code not in (0, None):
        return CRASHED, said
    return WRONG, "; ".join(_first_line(failure.text) for failure in result.failures)


def _not_applicable(result: FlowResult, fault: Fault) -> str | None:
    """Why the boundary said `fault` could not apply to its call (FlowResult.faults)."""
    for entry in result.faults:
        if isinstance(entry, dict) and entry.get("fault") == fault.label:
            why = entry.get("not_applicable")
            return str(why) if why else None
    return None


def _timed_out(result: FlowResult, timeout_s: float | None) -> bool:
    """The agent was killed at its timeout: no exit code, and the driver's failure says so
    (or, whatever it says, the run lasted the whole timeout)."""
    if result.agent_exit_code is not None:
        return False
    if any(marker in failure.text for failure in result.failures for marker in _TIMED_OUT):
        return True
    return timeout_s is not None and result.duration_s >= timeout_s


def _first_line(text: str) -> str:
    """A failure in one line: its first, and for a crash the last line of the agent's stderr
    (`...; its stderr ends with:` then the tail), which is usually the error it died of."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    head = lines[0]
    if len(lines) > 1 and head.endswith(_STDERR_TAIL):
        return f"{head.removesuffix(_STDERR_TAIL)}: {lines[-1]}"
    return head


@dataclass
class FlowChaos:
    """One flow's sweep: its baseline, its calls (the columns) and its cells."""

    name: str
    spec_path: Path
    baseline: FlowResult
    calls: list[CallAt] = field(default_factory=list)
    kinds: tuple[str, ...] = ()
    planned: list[Cell] = field(default_factory=list)
    timeout_s: float | None = None  # each cell's
    cells: list[CellResult] = field(default_factory=list)

    @property
    def passing(self) -> bool:
        return self.baseline.status == "passed"

    def why_not_passing(self) -> str:
        base = self.baseline
        said = base.skipped or base.error or (base.failures[0].text if base.failures else "")
        return f"{base.status}: {_first_line(said)}" if said else base.status


@dataclass(frozen=True)
class Sweep:
    """What the command asked: the kinds, the cell timeout (None: the spec's, capped) and
    `-j`."""

    kinds: tuple[str, ...] = DEFAULT_KINDS
    timeout_s: float | None = None
    workers: int = 1


def cell_timeout(sweep: Sweep, spec_timeout: float) -> float:
    return sweep.timeout_s if sweep.timeout_s is not None else min(spec_timeout, CELL_TIMEOUT_CAP_S)


def run_sweep(
    jobs: Sequence[FlowJob], sweep: Sweep, on_flow: Callable[[FlowChaos], None] | None = None
) -> list[FlowChaos]:
    """Each job's flow swept, in the order of `jobs`: its baseline, then its cells, all on
    one proxy, at most `sweep.workers` replays at once. `on_flow` hears of each flow once its
    baseline is judged (and its cells planned)."""
    return asyncio.run(stopping_once_on_ctrl_c(_sweep_all(jobs, sweep, on_flow)))


async def _sweep_all(
    jobs: Sequence[FlowJob], sweep: Sweep, on_flow: Callable[[FlowChaos], None] | None
) -> list[FlowChaos]:
    adopted_before = orphans.children()
    gate = asyncio.Semaphore(max(1, sweep.workers))
    hub = LazyHub()
    terminated = False

    async def replay(job: FlowJob) -> FlowResult:
        nonlocal terminated
        try:
            async with gate:
                return await execute_async(job, hub)
        except Terminated:  # SIGTERM: every replay is stopping; raised once all have
            terminated = True
            return error_row(job, "stopped by SIGTERM")

    async def one_flow(job: FlowJob) -> FlowChaos:
        chaos = _planned(job, await replay(job), sweep)
        if on_flow is not None:
            on_flow(chaos)
        cells = (_run_cell(cell, _cell_job(job, cell, chaos), replay) for cell in chaos.planned)
        chaos.cells = list(await asyncio.gather(*cells))
        return chaos

    try:
        async with asyncio.TaskGroup() as group:  # a single spec's error ends the sweep
            tasks = [group.create_task(one_flow(job)) for job in jobs]
    except BaseExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
    finally:
        await hub.stop()
        await asyncio.to_thread(orphans.sweep, adopted_before)
    if terminated:
        raise Terminated
    return [task.result() for task in tasks]


def _planned(job: FlowJob, baseline: FlowResult, sweep: Sweep) -> FlowChaos:
    """The flow's calls and cells, read from its spec and trace once its baseline passed.
    A single spec's unreadable spec or trace raises (exit 2); a directory's is its row."""
    chaos = FlowChaos(baseline.name, job.spec_path, baseline, kinds=sweep.kinds)
    if not chaos.passing:
        return chaos
    try:
        spec = load_spec(job.spec_path)
        trace = traces.load(job.trace_path)
    except FlowproofError as exc:
        if not job.in_directory:
            raise
        chaos.baseline = error_row(job, str(exc), baseline.name)
        return chaos
    chaos.calls = positions(trace)
    faulted = faulted_calls(spec.fault_plan, trace)
    chaos.planned = plan_cells(chaos.calls, sweep.kinds, faulted)
    chaos.timeout_s = cell_timeout(sweep, spec.timeout)
    return chaos


def _cell_job(job: FlowJob, cell: Cell, chaos: FlowChaos) -> FlowJob:
    """The baseline's job with the cell's fault on top, its own timeout, and every error
    its row (one cell's trouble never ends the sweep)."""
    return dataclasses.replace(
        job, injected=(cell.fault,), timeout_s=chaos.timeout_s, in_directory=True
    )


async def _run_cell(cell: Cell, job: FlowJob, replay: Callable[[FlowJob], Any]) -> CellResult:
    if cell.skip is not None:
        return CellResult(cell, NOT_APPLICABLE, cell.skip)
    result: FlowResult = await replay(job)
    outcome, detail = classify(result, cell.fault, job.timeout_s)
    return CellResult(cell, outcome, detail, result.duration_s)


# -- the report -----------------------------------------------------------------------------


def render_flow(chaos: FlowChaos, width: int = 160) -> list[str]:
    """A flow's matrix (calls across, kinds down), then a line per cell that did not
    survive, saying what happened; a flow that did not pass plainly, in one line."""
    where = f"{chaos.name} ({chaos.spec_path})"
    if not chaos.passing:
        return [f"{where}: not passing without faults ({chaos.why_not_passing()}): no cells"]
    if not chaos.cells:
        kinds = ", ".join(chaos.kinds)
        return [f"{where}: its recording has no call for the kinds {kinds}: no cells"]
    model = sum(at.boundary == "model" for at in chaos.calls)
    head = f"{where}: {model} model call(s)"
    mcp = len(chaos.calls) - model
    head += f", {mcp} MCP tool call(s)" if mcp else ""
    marks = {(result.cell.kind, result.cell.at): MARKS[result.outcome] for result in chaos.cells}
    headers = [column(at) for at in chaos.calls]
    size = max(len(text) for text in [*headers, *marks.values()])
    kind_size = max([4, *(len(kind) for kind, _ in marks)])
    lines = [
        head,
        ("  " + "kind".ljust(kind_size) + "".join(f"  {h:<{size}}" for h in headers)).rstrip(),
    ]
    for kind in (kind for kind in chaos.kinds if any(k == kind for k, _ in marks)):
        row = [marks.get((kind, at), "-") for at in chaos.calls]
        lines.append(
            ("  " + kind.ljust(kind_size) + "".join(f"  {m:<{size}}" for m in row)).rstrip()
        )
    for result in chaos.cells:
        if result.outcome != SURVIVED:
            said = f"  {result.cell.at}, {result.cell.kind}: {result.outcome}"
            said += f": {result.detail}" if result.detail else ""
            lines.append(said if len(said) <= width else said[: width - 3] + "...")
    return lines


def counts(flows: Sequence[FlowChaos]) -> Counter[str]:
    """How many cells ended each way, and how many flows did not pass plainly."""
    found: Counter[str] = Counter(result.outcome for chaos in flows for result in chaos.cells)
    found[NOT_PASSING] = sum(not chaos.passing for chaos in flows)
    return found


def summary_line(flows: Sequence[FlowChaos]) -> str:
    """`chaos: 30 cells: 24 survived, 3 diverged, ...` (every outcome, zeros too)."""
    found = counts(flows)
    cells = sum(len(chaos.cells) for chaos in flows)
    line = f"chaos: {cells} cell(s): " + ", ".join(f"{found[o]} {o}" for o in OUTCOMES)
    if found[NOT_PASSING]:
        line += f"; {found[NOT_PASSING]} flow(s) not passing without faults (no cells)"
    return line


def to_document(flows: Sequence[FlowChaos]) -> dict[str, Any]:
    """`--json`: every cell, each flow's baseline, the counts."""
    cells = [
        {
            "flow": chaos.name,
            "spec": str(chaos.spec_path),
            "call": str(result.cell.at),
            "kind": result.cell.kind,
            "outcome": result.outcome,
            "detail": result.detail,
            "duration_s": round(result.duration_s, 3),
        }
        for chaos in flows
        for result in chaos.cells
    ]
    found = counts(flows)
    return {
        "cells": cells,
        "flows": [
            {
                "flow": chaos.name,
                "spec": str(chaos.spec_path),
                "baseline": chaos.baseline.status,
                "detail": "" if chaos.passing else chaos.why_not_passing(),
                "calls": [str(at) for at in chaos.calls],
                "kinds": list(chaos.kinds),
            }
            for chaos in flows
        ],
        "summary": {"cells": len(cells), **{name: found[name] for name in FAIL_ON}},
    }


def failed_on(flows: Sequence[FlowChaos], fail_on: Sequence[str]) -> list[str]:
    """The `--fail-on` outcomes that occurred (any: exit 1)."""
    found = counts(flows)
    return [name for name in fail_on if found[name]]
