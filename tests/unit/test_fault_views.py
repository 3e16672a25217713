"""Where a flow's faults show: the run's text output, the trace's timeline, the run record."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowproof_cli.cassette import Turn
from flowproof_cli.cli.output import print_flow
from flowproof_cli.evidence.records import flow_row
from flowproof_cli.evidence.timeline import timeline
from flowproof_cli.trace import Trace
from flowproof_cli.verdict import FlowResult
from tests.unit.test_cassette_matching import reply, request

FAULT = {"fault": "model call 1: answer: 429", "line": 7, "applied": 2, "not_applicable": None}


def result(tmp_path: Path) -> FlowResult:
    flow = FlowResult("f", tmp_path / "f.flow.yaml", "replay", tmp_path / "f.trace.yaml")
    flow.faults = [dict(FAULT)]
    return flow


def test_a_failed_flow_says_how_many_attempts_each_fault_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow = result(tmp_path)
    flow.failures = []
    flow.error = "x"
    print_flow(flow, with_time=False)
    assert "fault: model call 1: answer: 429: 2 attempt(s) faulted" in capsys.readouterr().out


def test_the_timeline_names_the_fault_of_a_turn() -> None:
    turns = [
        Turn("openai-chat", request("one"), 200, reply("a"), fault="model call 1: answer: 429")
    ]
    lines = timeline(Trace(flow="f", turns=turns), "f.trace.yaml")
    assert "  fault: model call 1: answer: 429" in lines


def test_the_run_record_keeps_the_faults_and_omits_the_key_without_any(tmp_path: Path) -> None:
    (tmp_path / "f.flow.yaml").write_text("x")
    assert flow_row(result(tmp_path), tmp_path)["faults"] == [FAULT]
    plain = result(tmp_path)
    plain.faults = []
    assert "faults" not in flow_row(plain, tmp_path)
