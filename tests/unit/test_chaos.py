"""`flowproof chaos`: its cells planned, each replay's result classified, the matrix, the
summary and the JSON rendered, its flags parsed; and the sweep's order of work (baseline
first, cells only for a passing flow, each with its one fault) with the replays stood in for.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.cli import chaos as chaos_cli
from flowproof_cli.faults.plan import ANSWER, CRASH, CUT, MCP_ERROR, RESET, CallAt, Fault
from flowproof_cli.mcp.lane import Call, Lane
from flowproof_cli.mode import Mode
from flowproof_cli.runner import chaos
from flowproof_cli.runner.chaos import (
    CRASHED,
    DIVERGED,
    HUNG,
    NOT_APPLICABLE,
    SURVIVED,
    WRONG,
    Cell,
    CellResult,
    FlowChaos,
    Sweep,
)
from flowproof_cli.runner.job import FlowJob
from flowproof_cli.runner.suite import Hooks
from flowproof_cli.verdict import Failure, FlowResult
from tests.conftest import run_cli
from tests.unit.trace_builders import chat_trace

M1, M2 = CallAt("model", 1), CallAt("model", 2)
NOTES1 = CallAt("mcp", 1, server="notes")


def result(**values: Any) -> FlowResult:
    flow = FlowResult("weather", Path("w.flow.yaml"), "replay", Path("w.trace.yaml"))
    for name, value in values.items():
        setattr(flow, name, value)
    return flow


# -- planning -------------------------------------------------------------------------------


def test_each_kind_is_the_fault_the_issue_names() -> None:
    assert chaos.fault_for("429", M1) == Fault(M1, ANSWER, 429, retry_after=0.05)
    assert chaos.fault_for("529", M2) == Fault(M2, ANSWER, 529)
    assert chaos.fault_for("reset", M1) == Fault(M1, RESET)
    assert chaos.fault_for("cut", M1) == Fault(M1, CUT, 1)
    error = chaos.fault_for("mcp-error", NOTES1)
    assert (error.kind, error.value["code"]) == (MCP_ERROR, -32603)
    assert chaos.fault_for("mcp-crash", NOTES1) == Fault(NOTES1, CRASH)
    assert [chaos.fault_for(kind, M1).at for kind in chaos.MODEL_KINDS] == [M1] * 6


def test_the_calls_are_the_recorded_turns_then_each_servers_tool_calls() -> None:
    trace = chat_trace()
    trace.mcp = {
        "notes": Lane(
            [
                Call("initialize"),
                Call("tools/list"),
                Call("tools/call", {"name": "write"}),
                Call("tools/call", {"name": "read"}),
            ]
        )
    }
    found = chaos.positions(trace)
    assert found == [M1, M2, NOTES1, CallAt("mcp", 2, server="notes")]
    assert [chaos.column(at) for at in found] == ["m1", "m2", "notes#1", "notes#2"]


def test_cells_are_kinds_by_calls_of_their_own_boundary_and_a_spec_fault_is_not_doubled() -> None:
    cells = chaos.plan_cells([M1, M2, NOTES1], ["429", "mcp-error"], {M2})
    assert [(cell.kind, cell.at) for cell in cells] == [
        ("429", M1),
        ("429", M2),
        ("mcp-error", NOTES1),
    ]
    assert [cell.skip for cell in cells] == [None, "the spec's own fault is at model call 2", None]


def test_a_spec_fault_in_a_conversation_turn_is_found_among_the_recordings_calls() -> None:
    trace = chat_trace()
    trace.turns = [replace(turn, conversation_turn=n) for n, turn in enumerate(trace.turns, 1)]
    faults = [
        Fault(CallAt("model", 1, turn=2), ANSWER, 429),  # the flow's 2nd call
        Fault(CallAt("model", 2, turn=2), ANSWER, 429),  # none: the replay says so
        Fault(NOTES1, CRASH),
    ]
    assert chaos.faulted_calls(faults, trace) == {M2, NOTES1}


# -- classification -------------------------------------------------------------------------

TIMED_OUT = "the agent did not finish within 5 s and was killed; it made 1 model call(s)"
FAULT = Fault(M1, ANSWER, 500)
TAIL = "; its stderr ends with:"


@pytest.mark.parametrize(
    ("values", "outcome", "detail"),
    [
        ({"model_calls": 3, "recorded_turns": 2}, SURVIVED, "3 model request(s) for 2 call(s)"),
        (
            {
                "divergence": {"summary": "model changed"},
                "failures": [Failure("divergence at turn 1")],
                "agent_exit_code": None,
            },
            DIVERGED,
            "model changed",
        ),
        (
            {
                "agent_exit_code": 1,
                "failures": [Failure(f"exited with code 1{TAIL}\n  a\n  Boom\n")],
            },
            CRASHED,
            "exited with code 1: Boom",
        ),
        ({"error": "flowproof could not run it"}, CRASHED, "flowproof could not run it"),
        ({"agent_exit_code": None, "failures": [Failure(TIMED_OUT)]}, HUNG, TIMED_OUT),
        (
            {"agent_exit_code": None, "duration_s": 5.0, "failures": [Failure("other")]},
            HUNG,
            "other",
        ),
        (
            {"agent_exit_code": 0, "failures": [Failure("reply does not contain sunny", 9)]},
            WRONG,
            "reply does not contain sunny (step at line 9)",
        ),
        (
            {
                "faults": [
                    {
                        "fault": FAULT.label,
                        "line": None,
                        "applied": 0,
                        "not_applicable": "not streamed",
                    }
                ],
                "failures": [Failure("the fault could not apply")],
            },
            NOT_APPLICABLE,
            "not streamed",
        ),
    ],
    ids=["survived", "diverged", "crashed", "error", "hung", "hung-by-time", "wrong", "n/a"],
)
def test_a_cell_is_classified_from_its_replay(
    values: dict[str, Any], outcome: str, detail: str
) -> None:
    assert chaos.classify(result(**values), FAULT, 5.0) == (outcome, detail)


def test_another_faults_not_applicable_is_not_this_cells() -> None:
    other = {"fault": "model call 9: answer: 500", "not_applicable": "elsewhere"}
    assert chaos.classify(result(faults=[other]), FAULT, 5.0)[0] == SURVIVED


def test_a_stopped_agent_after_a_divergence_is_diverged_not_hung() -> None:
    stopped = result(agent_exit_code=None, duration_s=9.0, divergence={"summary": "no retry"})
    stopped.failures = [Failure(TIMED_OUT)]
    assert chaos.classify(stopped, FAULT, 5.0) == (DIVERGED, "no retry")


# -- the report -----------------------------------------------------------------------------


def swept(outcomes: dict[tuple[str, CallAt], tuple[str, str]], passing: bool = True) -> FlowChaos:
    baseline = result() if passing else result(failures=[Failure("reply does not contain x")])
    flow = FlowChaos("weather", Path("w.flow.yaml"), baseline, [M1, M2], ("429", "cut"))
    flow.cells = [
        CellResult(Cell(at, kind, chaos.fault_for(kind, at)), outcome, detail, 0.5)
        for (kind, at), (outcome, detail) in outcomes.items()
    ]
    return flow


SWEPT = {
    ("429", M1): (SURVIVED, ""),
    ("429", M2): (DIVERGED, "messages[2] added"),
    ("cut", M1): (NOT_APPLICABLE, "not streamed"),
    ("cut", M2): (WRONG, "reply does not contain sunny"),
}


def test_the_matrix_has_calls_across_kinds_down_and_says_what_did_not_survive() -> None:
    lines = chaos.render_flow(swept(SWEPT))
    assert lines[0] == "weather (w.flow.yaml): 2 model call(s)"
    assert lines[1:4] == [  # every column as wide as its widest header or mark
        "  kind  m1     m2",
        "  429   ok     DIV",
        "  cut   n/a    WRONG",
    ]
    assert lines[4:] == [
        "  model call 2, 429: diverged: messages[2] added",
        "  model call 1, cut: n/a: not streamed",
        "  model call 2, cut: wrong: reply does not contain sunny",
    ]


def test_a_flow_failing_without_faults_gets_one_line_and_no_cells() -> None:
    (line,) = chaos.render_flow(swept({}, passing=False))
    assert line == (
        "weather (w.flow.yaml): not passing without faults (failed: reply does not contain x):"
        " no cells"
    )


def test_the_summary_counts_every_outcome() -> None:
    flows = [swept(SWEPT), swept({}, passing=False)]
    assert chaos.summary_line(flows) == (
        "chaos: 4 cell(s): 1 survived, 1 diverged, 0 crashed, 0 hung, 1 wrong, 1 n/a; "
        "1 flow(s) not passing without faults (no cells)"
    )
    assert chaos.failed_on(flows, ["crashed", "wrong", "not-passing"]) == ["wrong", "not-passing"]
    assert chaos.failed_on(flows, ["crashed", "hung"]) == []


def test_the_json_carries_every_cell() -> None:
    document = chaos.to_document([swept(SWEPT)])
    json.dumps(document)  # plain JSON
    assert document["cells"][1] == {
        "flow": "weather",
        "spec": "w.flow.yaml",
        "call": "model call 2",
        "kind": "429",
        "outcome": "diverged",
        "detail": "messages[2] added",
        "duration_s": 0.5,
    }
    assert document["summary"]["cells"] == 4 and document["summary"]["n/a"] == 1
    assert document["flows"][0]["calls"] == ["model call 1", "model call 2"]


# -- flags ----------------------------------------------------------------------------------


def test_the_commands_names_are_the_runners() -> None:
    """The command spells them out (its --help loads no runner): they must stay equal."""
    assert chaos_cli.KINDS == chaos.KINDS
    assert chaos_cli.DEFAULT_KINDS == chaos.DEFAULT_KINDS
    assert chaos_cli.FAIL_ON == chaos.FAIL_ON


def test_a_bad_kind_exits_2_naming_the_valid_ones() -> None:
    done = run_cli("chaos", "specs/chat.flow.yaml", "--kinds", "429,teapot")
    assert done.code == 2, done.output
    assert "'--kinds': teapot is not a fault kind; the valid ones are: 429, 500, 503" in done.stderr
    assert "Traceback" not in done.output


def test_a_bad_fail_on_exits_2_naming_the_valid_ones() -> None:
    done = run_cli("chaos", "specs/chat.flow.yaml", "--fail-on", "diverged,boom")
    assert done.code == 2, done.output
    assert "boom is not an outcome; the valid ones are: survived, diverged" in done.stderr


def test_an_empty_directory_exits_2(tmp_path: Path) -> None:
    done = run_cli("chaos", tmp_path)
    assert done.code == 2 and f"no *.flow.yaml below {tmp_path}" in done.stderr


# -- the job and the sweep's order of work --------------------------------------------------


def job(spec_path: Path, **values: Any) -> FlowJob:
    return FlowJob(
        spec_path, spec_path.with_name("w.trace.yaml"), Mode.REPLAY, {}, Hooks(), **values
    )


def test_a_job_carries_its_injected_faults_through_json() -> None:
    faulted = job(Path("w.flow.yaml"), injected=(Fault(M2, ANSWER, 429, retry_after=0.05),))
    assert FlowJob.from_json(json.loads(json.dumps(faulted.to_json()))) == faulted
    assert FlowJob.from_json(job(Path("w.flow.yaml")).to_json()).injected == ()


def test_the_sweep_runs_cells_only_for_a_passing_flow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Baselines first; each cell is the baseline's job with one fault, the cell timeout and
    its errors as rows; a failing flow's trace is never even read."""
    (tmp_path / "w.flow.yaml").write_text((Path("specs/chat.flow.yaml")).read_text())
    (tmp_path / "w.trace.yaml").write_text((Path("specs/chat.trace.yaml")).read_text())
    ran: list[FlowJob] = []

    async def fake_execute(flow_job: FlowJob, hub: object) -> FlowResult:
        ran.append(flow_job)
        failing = flow_job.spec_path.name == "bad.flow.yaml"
        return result(failures=[Failure("no")] if failing else [], agent_exit_code=0)

    monkeypatch.setattr(chaos, "execute_async", fake_execute)
    good, bad = job(tmp_path / "w.flow.yaml"), job(tmp_path / "bad.flow.yaml")
    flows = chaos.run_sweep([good, bad], Sweep(kinds=("500", "reset"), timeout_s=7.0, workers=2))
    assert [flow.passing for flow in flows] == [True, False]
    assert [(r.cell.kind, str(r.cell.at), r.outcome) for r in flows[0].cells] == [
        ("500", "model call 1", SURVIVED),
        ("500", "model call 2", SURVIVED),
        ("reset", "model call 1", SURVIVED),
        ("reset", "model call 2", SURVIVED),
    ]
    cells = [flow_job for flow_job in ran if flow_job.injected]
    assert len(ran) == 6 and len(cells) == 4
    assert {(c.timeout_s, c.in_directory) for c in cells} == {(7.0, True)}
    assert cells[0].injected == (Fault(M1, ANSWER, 500),)
    assert flows[1].cells == [] and flows[1].calls == []


def test_the_cell_timeout_is_the_specs_capped_unless_given() -> None:
    assert chaos.cell_timeout(Sweep(), 300.0) == 60.0
    assert chaos.cell_timeout(Sweep(), 20.0) == 20.0
    assert chaos.cell_timeout(Sweep(timeout_s=3.0), 300.0) == 3.0
