"""Where a passing recording goes (`place_recording`), how a candidate is settled
(`review`) and how what was staged replaces the trace (`commit`) or not (`discard`),
without an agent: the end-to-end paths are in tests/e2e/test_rerecord.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowproof_cli.evidence.trajectory_diff import Intent
from flowproof_cli.runner.rerecord import (
    candidate_path_for,
    commit,
    discard,
    place_recording,
    review,
)
from flowproof_cli.trace import save
from flowproof_cli.trace.storage import dumps
from flowproof_cli.verdict import Failure, FlowResult
from tests.unit.trace_builders import TIME, chat_trace

PARIS = chat_trace(calls=(("get_weather", '{"city": "Paris"}'), TIME), ids="b")


def result_for(trace: Path) -> FlowResult:
    return FlowResult("weather", trace.with_name("weather.flow.yaml"), "record", trace)


@pytest.mark.parametrize(
    ("name", "candidate"),
    [
        ("x.trace.yaml", "x.trace.candidate.yaml"),
        ("out.yaml", "out.candidate.yaml"),
        ("trace", "trace.candidate"),
    ],
)
def test_candidate_names(tmp_path: Path, name: str, candidate: str) -> None:
    assert candidate_path_for(tmp_path / name) == tmp_path / candidate


def test_a_first_recording_becomes_the_trace_when_committed(tmp_path: Path) -> None:
    trace = tmp_path / "weather.trace.yaml"
    result = result_for(trace)
    place_recording(trace, chat_trace(), Intent(), result)
    assert not trace.exists() and not result.trace_written  # staged, not in place yet
    assert result.staged_trace is not None and result.staged_trace.parent == tmp_path
    commit([result])
    assert result.trace_written and result.candidate_path is None
    assert result.staged_trace is None and result.trace_sha256 is not None
    assert trace.read_text() == dumps(chat_trace())
    assert result.notes == []
    assert [p.name for p in tmp_path.iterdir()] == [trace.name]


def test_an_unchanged_trajectory_is_rewritten_with_a_note(tmp_path: Path) -> None:
    trace = tmp_path / "weather.trace.yaml"
    save(trace, chat_trace())
    result = result_for(trace)
    place_recording(trace, chat_trace(ids="new"), Intent(), result)
    assert "call_new0" not in trace.read_text()
    commit([result])
    assert result.trace_written and result.candidate_path is None
    assert "call_new0" in trace.read_text()
    assert result.notes[0].startswith(f"trajectory unchanged: rewrote {trace} without review")
    assert not candidate_path_for(trace).exists()


def test_a_discarded_recording_leaves_the_trace_and_nothing_beside_it(tmp_path: Path) -> None:
    trace = tmp_path / "weather.trace.yaml"
    save(trace, chat_trace())
    old = trace.read_bytes()
    result = result_for(trace)
    place_recording(trace, chat_trace(ids="new"), Intent(), result)
    discard([result])
    commit([result])  # nothing left to commit
    assert trace.read_bytes() == old and not result.trace_written
    assert [p.name for p in tmp_path.iterdir()] == [trace.name]


def test_a_changed_trajectory_waits_beside_the_trace(tmp_path: Path) -> None:
    trace = tmp_path / "weather.trace.yaml"
    save(trace, chat_trace())
    old = trace.read_bytes()
    result = result_for(trace)
    place_recording(trace, PARIS, Intent(), result)
    assert trace.read_bytes() == old
    assert not result.trace_written
    assert result.candidate_path == tmp_path / "weather.trace.candidate.yaml"
    assert result.candidate_path.read_text() == dumps(PARIS)
    assert "  get_weather.city: Nairobi -> Paris" in result.trajectory_diff


def test_a_trace_that_cannot_be_read_still_needs_approval(tmp_path: Path) -> None:
    trace = tmp_path / "weather.trace.yaml"
    trace.write_text("flowproof_trace: 7\n")
    result = result_for(trace)
    place_recording(trace, PARIS, Intent(), result)
    assert result.candidate_path is not None
    (line,) = result.trajectory_diff
    assert line.startswith("the existing trace cannot be compared (")
    assert "trace format version 7" in line
    assert f"`flowproof show {result.candidate_path}`" in line
    assert trace.read_text() == "flowproof_trace: 7\n"


def waiting(tmp_path: Path) -> FlowResult:
    trace = tmp_path / "weather.trace.yaml"
    save(trace, chat_trace())
    result = result_for(trace)
    place_recording(trace, PARIS, Intent(), result)
    return result


def test_review_with_yes_moves_the_candidate_and_prints_the_diff(tmp_path: Path) -> None:
    result = waiting(tmp_path)
    candidate = result.candidate_path
    printed: list[str] = []
    review([result], yes=True, ask=None, echo=printed.append)
    assert printed[0] == f"weather: the new recording differs from {result.trace_path}"
    assert "    get_weather.city: Nairobi -> Paris" in printed
    assert result.trace_path.read_text() == dumps(chat_trace())  # moved only by commit
    commit([result])
    assert result.trace_written and result.passed
    assert result.candidate_path is None and candidate is not None and not candidate.exists()
    assert result.trace_path.read_text() == dumps(PARIS)
    assert result.trace_sha256 is not None


def test_an_approved_candidate_not_committed_stays_beside_the_trace(tmp_path: Path) -> None:
    result = waiting(tmp_path)
    candidate = result.candidate_path
    review([result], yes=True, ask=None, echo=None)
    discard([result])  # interrupted before the commit
    assert result.candidate_path == candidate and candidate is not None and candidate.exists()
    assert result.trace_path.read_text() == dumps(chat_trace())


def test_review_asks_and_a_refusal_discards_the_candidate(tmp_path: Path) -> None:
    result = waiting(tmp_path)
    candidate = result.candidate_path
    asked: list[str] = []

    def no(question: str) -> bool:
        asked.append(question)
        return False

    review([result], yes=False, ask=no, echo=None)
    assert asked == [f"Replace {result.trace_path} with this recording?"]
    assert result.failures == [
        Failure(f"re-record refused: kept {result.trace_path} and discarded the new recording")
    ]
    assert candidate is not None and not candidate.exists()
    assert result.trace_path.read_text() == dumps(chat_trace())


def test_review_without_anyone_to_ask_keeps_both_files(tmp_path: Path) -> None:
    result = waiting(tmp_path)
    review([result], yes=False, ask=None, echo=None)
    assert result.candidate_path is not None and result.candidate_path.exists()
    assert result.failures[0].text.startswith("re-record not approved (no terminal to ask on)")
    assert result.exit_code == 1


def test_a_candidate_that_cannot_be_moved_is_an_error(tmp_path: Path) -> None:
    result = waiting(tmp_path)
    assert result.candidate_path is not None
    result.candidate_path.unlink()  # gone before it could be accepted
    review([result], yes=True, ask=None, echo=None)
    commit([result])
    assert result.error is not None
    assert result.error.startswith("could not move the new recording ")
    assert result.exit_code == 2
    assert not result.trace_written


def test_results_without_a_candidate_are_left_alone(tmp_path: Path) -> None:
    result = result_for(tmp_path / "weather.trace.yaml")
    printed: list[str] = []
    review([result], yes=False, ask=lambda _: pytest.fail("asked"), echo=printed.append)
    assert printed == [] and result.passed


def test_the_candidate_travels_in_the_result_json(tmp_path: Path) -> None:
    result = waiting(tmp_path)
    again = FlowResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again.candidate_path == result.candidate_path
    assert again.trajectory_diff == result.trajectory_diff
    plain = FlowResult.from_json(result_for(tmp_path / "t.trace.yaml").to_json())
    assert plain.candidate_path is None
