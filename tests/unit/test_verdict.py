"""A failure is data: its message, its step's line and its conversation turn, rendered as
text in one place, and read back from the JSON of this flowproof or of an older one."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from flowproof_cli.cli.output import verdict_line
from flowproof_cli.runner.junit import junit_xml
from flowproof_cli.verdict import Failure, FlowResult


def _failed(*failures: Failure) -> FlowResult:
    result = FlowResult("f", Path("f.flow.yaml"), "replay", Path("f.trace.yaml"))
    result.failures = list(failures)
    return result


def test_the_text_adds_the_step_line_only_when_there_is_one() -> None:
    assert Failure("reply was wrong", line=7).text == "reply was wrong (step at line 7)"
    assert str(Failure("reply was wrong", line=7, turn=2)) == "reply was wrong (step at line 7)"
    assert Failure("divergence at turn 1").text == "divergence at turn 1"


def test_a_failure_round_trips_through_json() -> None:
    for failure in (Failure("m"), Failure("m", line=7), Failure("m", line=7, turn=2)):
        assert failure.to_json() == {"message": "m", "line": failure.line, "turn": failure.turn}
        assert Failure.from_json(json.loads(json.dumps(failure.to_json()))) == failure


def test_the_old_plain_text_form_reads_as_a_message_that_renders_the_same() -> None:
    old = "assert reply contains x: no (step at line 7)"
    assert Failure.from_json(old) == Failure(old)
    assert Failure.from_json(old).text == old


def test_a_result_carries_failures_as_data_and_reads_both_forms() -> None:
    result = _failed(Failure("a"), Failure("b", line=9, turn=1))
    data = json.loads(json.dumps(result.to_json()))
    assert data["failures"] == [
        {"message": "a", "line": None, "turn": None},
        {"message": "b", "line": 9, "turn": 1},
    ]
    assert FlowResult.from_json(data) == result
    data["failures"] = ["a", "b (step at line 9)"]  # an older flowproof's result
    older = FlowResult.from_json(data)
    assert older.failure_texts == ["a", "b (step at line 9)"] == result.failure_texts
    assert older.failures == [Failure("a"), Failure("b (step at line 9)")]
    del data["failures"]
    assert FlowResult.from_json(data).failures == []


def test_text_output_and_junit_print_the_rendered_text() -> None:
    result = _failed(Failure("first", line=4), Failure("second"))
    assert verdict_line(result) == "FAIL: f - first (step at line 4)\n    also: second"
    case = ET.fromstring(junit_xml([result], Path.cwd(), elapsed_s=0.0)).find(".//failure")
    assert case is not None
    assert case.get("message") == "first (step at line 4)\nsecond"
