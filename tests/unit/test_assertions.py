"""Evaluating steps against a Trajectory: every assertion can pass and can fail."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowproof_cli.assertions import AssertionFailure, evaluate
from flowproof_cli.errors import ConfigError
from flowproof_cli.spec import FlowSpec, parse_spec
from flowproof_cli.trajectory import AssistantTurn, ToolCall, Trajectory


def make_spec(*steps: str, strict: bool = False, tools: str = "") -> FlowSpec:
    lines = ["name: t", "app: agent", "agent:", "  command: run", f"strict: {str(strict).lower()}"]
    if tools:
        lines.append(tools)
    lines += ["steps:", "  - prompt: go"]
    lines += [f"  - {step}" for step in steps]
    return parse_spec("\n".join(lines) + "\n", "t.flow.yaml")


def call(name: str, turn: int = 1, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, raw_arguments=json.dumps(arguments), turn=turn)


def trajectory(*calls: ToolCall, reply: str | None = "done") -> Trajectory:
    turns = [AssistantTurn(turn=i + 1, text=None, tool_calls=(c,)) for i, c in enumerate(calls)]
    if reply is not None:
        turns.append(AssistantTurn(turn=len(turns) + 1, text=reply, tool_calls=()))
    return Trajectory(turns=turns)


def run(spec: FlowSpec, traj: Trajectory, environ: dict[str, str] | None = None) -> list[str]:
    return [failure.message for failure in evaluate(spec, traj, environ or {})]


# --- matchers: each passes and fails --------------------------------------------------------

ARGS: dict[str, Any] = {
    "city": "Nairobi",
    "units": "metric",
    "days": 3,
    "ratio": 0.5,
    "alert": True,
    "note": None,
    "tags": ["rain", "wind", 7],
    "opts": {"lang": "en"},
    "passengers": [{"name": "Ada"}, {"name": "Grace"}],
}


@pytest.mark.parametrize(
    ("clause", "passes"),
    [
        ("city equals Nairobi", True),
        ("city equals nairobi", False),
        ("city is Nairobi", True),
        ('city equals "Nairobi"', True),
        ("city equals Nai", False),
        ("days equals 3", True),
        ("days equals 3.0", True),
        ("days equals 4", False),
        ("days equals three", False),
        ("ratio equals 0.50", True),
        ("ratio equals 0.5000001", False),
        ("alert equals true", True),
        ("alert is false", False),
        ("alert equals 1", False),
        ("note equals null", True),
        ("note equals None", False),
        ('opts equals {"lang":"en"}', True),
        ('opts equals {"lang":"fr"}', False),
        ('tags equals ["rain", "wind", 7.0]', True),
        ('tags equals ["rain"]', False),
        ("passengers.1.name equals Grace", True),
        ("passengers.1.name equals Ada", False),
        ("passengers.5.name equals Ada", False),
        ("city contains airo", True),
        ("city contains Paris", False),
        ("tags contains wind", True),
        ("tags contains 7", True),
        ("tags contains win", False),
        ("opts contains lang", True),
        ("opts contains en", False),
        ("days contains 3", True),
        ("days contains 4", False),
        ("city matches ^Nai.*i$", True),
        ("city matches ^nai", False),
        ('opts matches "lang":"en"', True),
        ("days matches ^3$", True),
        ("days matches ^4$", False),
        ("note exists", True),
        ("passengers.0.name exists", True),
        ("country exists", False),
        ("passengers.2 exists", False),
        ("country is absent", True),
        ("country is missing", True),
        ("city is absent", False),
        ("note is absent", False),
        ("missing.deeper equals x", False),
        ("missing.deeper contains x", False),
        ("missing.deeper matches .", False),
    ],
)
def test_matcher(clause: str, passes: bool) -> None:
    spec = make_spec(f"assert_tool_call: search where {clause}")
    failures = run(spec, trajectory(call("search", **ARGS)))
    assert (failures == []) is passes, failures


def test_several_clauses_must_all_hold() -> None:
    traj = trajectory(call("get_weather", city="Nairobi", units="imperial"))
    ok = make_spec("assert_tool_call: get_weather where city equals Nairobi and units exists")
    bad = make_spec("assert_tool_call: get_weather where city equals Nairobi and units is metric")
    assert run(ok, traj) == []
    (message,) = run(bad, traj)
    assert 'call 1 units = "imperial"' in message
    assert "city" not in message.split("no call matched:")[1]


def test_failure_message_names_actual_values() -> None:
    spec = make_spec("assert_tool_call: get_weather where city equals Nairobi")
    (failure,) = evaluate(spec, trajectory(call("get_weather", city="Paris")), {})
    assert failure.step_line == 8
    assert failure.message == (
        "assert_tool_call get_weather where city equals Nairobi: get_weather was called 1 "
        'time(s) but no call matched: call 1 city = "Paris"'
    )
    assert str(failure).startswith("line 8: ")


def test_failure_message_names_absent_path() -> None:
    spec = make_spec("assert_tool_call: get_weather where city equals Nairobi")
    (message,) = run(spec, trajectory(call("get_weather", town="Nairobi")))
    assert "call 1 city is absent" in message


def test_non_json_arguments() -> None:
    spec = make_spec("assert_tool_call: t where a exists")
    traj = trajectory(ToolCall(name="t", raw_arguments="not json", turn=1))
    (message,) = run(spec, traj)
    assert "not JSON" in message
    assert run(make_spec("assert_tool_call: t"), traj) == []


def test_never_called_lists_the_tools_called() -> None:
    spec = make_spec("assert_tool_call: get_weather")
    (message,) = run(spec, trajectory(call("get_time"), call("search")))
    assert "get_weather was never called" in message
    assert "get_time, search" in message
    (message,) = run(spec, trajectory())
    assert "made no tool calls" in message


# --- order ------------------------------------------------------------------------------------


def test_subsequence_allows_calls_in_between() -> None:
    spec = make_spec("assert_tool_call: a", "assert_tool_call: c")
    assert run(spec, trajectory(call("a"), call("b"), call("c"))) == []


def test_order_failure_points_at_previous_step() -> None:
    spec = make_spec("assert_tool_call: a", "assert_tool_call: c")
    (failure,) = evaluate(spec, trajectory(call("c"), call("a")), {})
    assert failure.step_line == 9
    assert "c was called, but only before the call matched by the previous assertion" in (
        failure.message
    )
    assert "(step 2, line 8)" in failure.message


def test_each_assertion_consumes_one_call() -> None:
    spec = make_spec("assert_tool_call: a", "assert_tool_call: a")
    assert run(spec, trajectory(call("a"), call("a"))) == []
    (message,) = run(spec, trajectory(call("a")))
    assert "only before the call matched by the previous assertion" in message


def test_greedy_match_uses_first_matching_call() -> None:
    spec = make_spec("assert_tool_call: t where n equals 2", "assert_tool_call: t where n equals 1")
    assert run(spec, trajectory(call("t", n=1), call("t", n=2), call("t", n=1))) == []
    (message,) = run(spec, trajectory(call("t", n=1), call("t", n=2)))
    assert "only before" in message


def test_prompt_steps_do_not_affect_order() -> None:
    spec = make_spec("assert_tool_call: a", "prompt: more", "assert_tool_call: b")
    assert run(spec, trajectory(call("a"), call("b"))) == []


# --- strict -----------------------------------------------------------------------------------


def test_strict_passes_on_exact_sequence() -> None:
    spec = make_spec("assert_tool_call: a", "assert_tool_call: b", strict=True)
    assert run(spec, trajectory(call("a"), call("b"))) == []


def test_strict_reports_first_unexpected_call() -> None:
    spec = make_spec("assert_tool_call: a", "assert_tool_call: c", strict=True)
    (failure,) = evaluate(spec, trajectory(call("a"), call("b", turn=2), call("c")), {})
    assert failure.step_line is None
    assert "unexpected tool call b at position 2 of 3 (turn 2)" in failure.message
    assert "strict: false" in failure.message


def test_strict_reports_trailing_call() -> None:
    spec = make_spec("assert_tool_call: a", strict=True)
    (message,) = run(spec, trajectory(call("a"), call("a")))
    assert "unexpected tool call a at position 2 of 2" in message


def test_not_strict_allows_extra_calls() -> None:
    spec = make_spec("assert_tool_call: a")
    assert run(spec, trajectory(call("x"), call("a"), call("y"))) == []


# --- assert_no_tool_call ----------------------------------------------------------------------


def test_no_tool_call_passes_when_absent() -> None:
    spec = make_spec("assert_no_tool_call: delete_everything")
    assert run(spec, trajectory(call("get_time"))) == []


def test_no_tool_call_fails_anywhere_in_the_trajectory() -> None:
    spec = make_spec("assert_tool_call: b", "assert_no_tool_call: a")
    (failure,) = evaluate(spec, trajectory(call("a", turn=1, x=1), call("b", turn=2)), {})
    assert failure.step_line == 9
    assert 'a was called at position 1 of 2 (turn 1) with arguments {"x": 1}' in failure.message


def test_no_tool_call_with_clauses() -> None:
    spec = make_spec("assert_no_tool_call: transfer where amount equals 1000 and to exists")
    assert run(spec, trajectory(call("transfer", amount=5, to="x"))) == []
    assert run(spec, trajectory(call("transfer", amount=1000))) == []
    (message,) = run(
        spec,
        trajectory(call("transfer", amount=1000.0, to="x"), call("transfer", amount=1e3, to=1)),
    )
    assert "(2 matching calls)" in message


# --- variables ----------------------------------------------------------------------------


def test_variables_in_values_resolve_at_evaluation() -> None:
    spec = make_spec(
        "assert_tool_call: get_weather where city equals ${CITY}",
        "assert_tool_call: get_weather where city matches ^${PREFIX}",
        "assert: reply contains ${CITY}",
    )
    traj = trajectory(
        call("get_weather", city="Nairobi"),
        call("get_weather", city="Nakuru"),
        reply="It is sunny in Nairobi",
    )
    assert run(spec, traj, {"CITY": "Nairobi", "PREFIX": "Nak"}) == []
    failures = run(spec, traj, {"CITY": "Paris", "PREFIX": "Nak"})
    assert len(failures) == 2


def test_unset_variable_is_a_config_error_naming_the_step() -> None:
    spec = make_spec("assert_tool_call: get_weather where city equals ${CITY}")
    with pytest.raises(ConfigError) as info:
        evaluate(spec, trajectory(call("get_weather", city="x")), {})
    assert "CITY" in str(info.value)
    assert "line 8" in str(info.value)


# --- reply ------------------------------------------------------------------------------------


def test_reply_contains() -> None:
    spec = make_spec("assert: reply contains sunny", "assert: reply is 25")
    assert run(spec, trajectory(reply="It is sunny and 25 degrees")) == []
    (message,) = run(make_spec("assert: reply contains snow"), trajectory(reply="It is sunny"))
    assert message == (
        'assert reply contains snow: the reply does not contain "snow"; the reply was: '
        '"It is sunny"'
    )


def test_reply_empty_vs_absent() -> None:
    spec = make_spec("assert: reply contains sunny")
    (empty,) = run(spec, trajectory(reply=""))
    assert "the reply is empty" in empty
    (ends_in_tool,) = run(spec, trajectory(call("get_weather"), reply=None))
    assert "no reply" in ends_in_tool
    assert "the last model turn (turn 1) is a tool call (get_weather) with no text" in ends_in_tool
    (no_call,) = run(spec, Trajectory())
    assert "made no model call" in no_call


def test_ending_on_final_answer_points_at_asserting_on_that_call() -> None:
    # smolagents ends every run with a final_answer tool call and no text after it.
    spec = make_spec("assert: reply contains sunny")
    traj = trajectory(
        call("get_weather", city="Nairobi"),
        call("final_answer", turn=2, answer="It is sunny in Nairobi"),
        reply=None,
    )
    (message,) = run(spec, traj)
    assert message == (
        "assert reply contains sunny: there is no reply: the last model turn (turn 2) is a "
        "tool call (final_answer) with no text, so the agent gives its answer through "
        'final_answer (final_answer\'s answer is "It is sunny in Nairobi"). Fix: assert on '
        "that call instead: `assert_tool_call: final_answer where answer contains sunny`"
    )
    assert "stop" not in message and "time out" not in message


def test_the_suggested_final_answer_assertion_passes() -> None:
    traj = trajectory(call("final_answer", answer="It is sunny"), reply=None)
    assert run(make_spec("assert_tool_call: final_answer where answer contains sunny"), traj) == []
    red = make_spec("assert_tool_call: final_answer where answer contains snow")
    (message,) = run(red, traj)
    assert 'answer = "It is sunny"' in message


@pytest.mark.parametrize(
    ("name", "arguments", "suggestion"),
    [
        ("final_result", {"city": "Nairobi", "n": 2}, "final_result where city contains sunny"),
        ("FinalAnswer", {"n": 2}, "FinalAnswer where n contains ...`"),
        ("final_answer", {}, "`assert_tool_call: final_answer`"),
    ],
)
def test_final_answer_like_tools_get_a_suggestion_on_their_arguments(
    name: str, arguments: dict[str, Any], suggestion: str
) -> None:
    traj = trajectory(call(name, **arguments), reply=None)
    (message,) = run(make_spec("assert: reply contains sunny"), traj)
    assert "so the agent gives its answer through" in message
    assert suggestion in message


def test_ending_on_another_tool_suggests_asserting_on_the_call() -> None:
    traj = trajectory(call("get_weather", city="Nairobi"), reply=None)
    (message,) = run(make_spec("assert: reply contains sunny"), traj)
    assert message == (
        "assert reply contains sunny: there is no reply: the last model turn (turn 1) is a "
        "tool call (get_weather) with no text, and no model turn followed it (get_weather's "
        'city is "Nairobi"). If the agent ends on a tool call by design, assert on that call '
        "instead: `assert_tool_call: get_weather where city contains ...`"
    )


def test_a_final_answer_beside_another_call_is_the_one_suggested() -> None:
    turn = AssistantTurn(
        turn=1,
        text=None,
        tool_calls=(call("log", note="x"), call("final_answer", answer="sunny and warm")),
    )
    (message,) = run(make_spec("assert: reply contains sunny and warm"), Trajectory([turn]))
    assert "tool call (log, final_answer)" in message
    # A value holding ` and ` would not parse as one: the suggestion leaves it to the user.
    assert "`assert_tool_call: final_answer where answer contains ...`" in message


def test_failures_come_in_step_order() -> None:
    spec = make_spec("assert: reply contains x", "assert_tool_call: a", "assert_no_tool_call: b")
    failures = evaluate(spec, trajectory(call("b"), reply="y"), {})
    assert [f.step_line for f in failures] == [8, 9, 10]
    assert all(isinstance(f, AssertionFailure) for f in failures)
