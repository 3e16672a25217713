"""The assertion evaluator pinned where mutation testing found it loose (docs/falsifiability.md).

The unit tests check that each assertion passes and fails; these pin the edges a mutant
moved unnoticed: booleans against numbers inside JSON values, where a list or a mapping is
compared with the other, the cut-off of long values, and the whole text of each failure.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowproof_cli.assertions import RunFacts, evaluate
from flowproof_cli.errors import ConfigError, SpecError
from flowproof_cli.spec import FlowSpec, parse_spec
from flowproof_cli.trajectory import AssistantTurn, ToolCall, Trajectory

HEAD = "name: t\napp: agent\nagent:\n  command: run\n"


def spec_of(*steps: str, strict: bool = False) -> FlowSpec:
    lines = "".join(f"  - {step}\n" for step in steps)
    text = f"{HEAD}strict: {str(strict).lower()}\nsteps:\n  - prompt: go\n{lines}"
    return parse_spec(text, "t.flow.yaml")


def call(name: str, turn: int = 1, raw: str | None = None, **arguments: Any) -> ToolCall:
    raw_arguments = json.dumps(arguments, ensure_ascii=False) if raw is None else raw
    return ToolCall(name=name, raw_arguments=raw_arguments, turn=turn)


def trajectory(*calls: ToolCall, reply: str | None = "done") -> Trajectory:
    turns = [AssistantTurn(turn=i + 1, text=None, tool_calls=(c,)) for i, c in enumerate(calls)]
    if reply is not None:
        turns.append(AssistantTurn(turn=len(turns) + 1, text=reply, tool_calls=()))
    return Trajectory(turns=turns)


def failures(spec: FlowSpec, traj: Trajectory, **evaluate_options: Any) -> list[str]:
    environ = evaluate_options.pop("environ", {})
    return [str(failure) for failure in evaluate(spec, traj, environ, **evaluate_options)]


def passes(clause: str, **arguments: Any) -> bool:
    spec = spec_of(f"assert_tool_call: t where {clause}")
    return failures(spec, trajectory(call("t", **arguments))) == []


# -- equality inside JSON values: true is not 1, a list is not a mapping ----------------------


@pytest.mark.parametrize(
    ("clause", "arguments", "expected"),
    [
        ("flags equals [true, false]", {"flags": [True, False]}, True),
        ("flags equals [true, false]", {"flags": [1, 0]}, False),
        ("flags equals [1, 0]", {"flags": [True, False]}, False),
        ("flags equals [false]", {"flags": [True]}, False),
        ("flags equals [1.0, 2]", {"flags": [1, 2.0]}, True),
        ("opts equals [1]", {"opts": {"a": 1}}, False),
        ('tags equals {"a":1}', {"tags": ["a"]}, False),
        ("alert equals false", {"alert": False}, True),
        ("alert is FALSE", {"alert": False}, True),
        ("alert equals true", {"alert": False}, False),
        ('city equals "Paris"', {"city": "Nairobi"}, False),
        ('city equals "Nairobi"', {"city": "Nairobi"}, True),
    ],
)
def test_equals_inside_json_values(clause: str, arguments: dict[str, Any], expected: bool) -> None:
    assert passes(clause, **arguments) is expected


def test_a_leading_space_in_an_args_leaf_is_part_of_the_value_quoted_or_not() -> None:
    """A structured leaf is the YAML value as written; only an exactly quoted text is unquoted."""
    traj = trajectory(call("t", city="Nairobi"))
    for leaf, expected in (
        ("'\"Nairobi\"'", True),
        ("' \"Nairobi\"'", False),
        ("' Nairobi'", False),
    ):
        spec = spec_of(f"assert_tool_call: {{name: t, args: {{city: {leaf}}}}}")
        assert (failures(spec, traj) == []) is expected, leaf


# -- the text of a failure --------------------------------------------------------------------


def test_a_failure_shows_non_ascii_values_as_written() -> None:
    spec = spec_of("assert_tool_call: t where city equals Paris")
    assert failures(spec, trajectory(call("t", city="Zürich"))) == [
        "line 8: assert_tool_call t where city equals Paris: t was called 1 time(s) but no call "
        'matched: call 1 city = "Zürich"'
    ]
    assert passes("opts matches Zü", opts={"city": "Zürich"})


def test_every_failed_clause_is_listed_comma_separated() -> None:
    spec = spec_of("assert_tool_call: t where a equals 1 and b equals 2")
    assert failures(spec, trajectory(call("t", a=0, b=0))) == [
        "line 8: assert_tool_call t where a equals 1 and b equals 2: t was called 1 time(s) but "
        "no call matched: call 1 a = 0, b = 0"
    ]


def test_a_missing_call_lists_only_the_calls_after_the_previous_match() -> None:
    spec = spec_of("assert_tool_call: a", "assert_tool_call: t where n equals 9")
    traj = trajectory(call("t", n=1), call("a", turn=2), call("t", turn=3, n=2), call("t", n=3))
    assert failures(spec, traj) == [
        "line 9: assert_tool_call t where n equals 9: t was called 3 time(s) but no call "
        "matched: call 2 n = 2; call 3 n = 3"
    ]


@pytest.mark.parametrize(
    ("count", "tail"),
    [(5, "call 5 n = 4"), (6, "call 5 n = 4; ... and 1 more"), (8, "call 5 n = 4; ... and 3 more")],
)
def test_a_missing_call_shows_five_candidates_then_counts_the_rest(count: int, tail: str) -> None:
    spec = spec_of("assert_tool_call: t where n equals 9")
    (failure,) = failures(spec, trajectory(*(call("t", n=i) for i in range(count))))
    assert failure.endswith(
        f"no call matched: call 1 n = 0; call 2 n = 1; call 3 n = 2; call 4 n = 3; {tail}"
    )


@pytest.mark.parametrize(
    ("count", "where"),
    [
        (5, "1 (turn 1), 2 (turn 2), 3 (turn 3), 4 (turn 4), 5 (turn 5) of 5"),
        (7, "1 (turn 1), 2 (turn 2), 3 (turn 3), 4 (turn 4), 5 (turn 5) and 2 more of 7"),
    ],
)
def test_a_wrong_count_shows_five_positions_then_counts_the_rest(count: int, where: str) -> None:
    spec = spec_of("assert_tool_call: {call: t, times: 1}")
    (failure,) = failures(spec, trajectory(*(call("t", turn=i + 1) for i in range(count))))
    assert failure.endswith(
        f"expected 1 matching call(s), saw {count}: at position(s) {where} tool call(s)"
    )


def test_strict_names_the_whole_sequence_and_a_flow_wide_failure_has_no_line() -> None:
    spec = spec_of("assert_tool_call: a", strict=True)
    (failure,) = evaluate(spec, trajectory(call("a"), call("b"), call("c")), {})
    assert str(failure) == (
        "strict: unexpected tool call b at position 2 of 3 (turn 1) is not matched by any "
        "assert_tool_call step; tools called, in order: a, b, c. Fix: assert it with "
        "assert_tool_call, or set `strict: false`"
    )


@pytest.mark.parametrize(("length", "cut"), [(298, False), (299, True)])
def test_a_long_value_is_shown_whole_up_to_300_characters(length: int, cut: bool) -> None:
    spec = spec_of("assert_tool_call: t where city equals Paris")
    (failure,) = failures(spec, trajectory(call("t", city="x" * length)))
    shown = failure.split("call 1 city = ")[1]
    assert shown == ('"' + "x" * 296 + "..." if cut else '"' + "x" * length + '"')


# -- no reply ---------------------------------------------------------------------------------


def test_no_model_call_at_all_has_no_reply() -> None:
    (failure,) = failures(spec_of("assert: reply contains x"), Trajectory())
    assert (
        failure
        == "line 8: assert reply contains x: there is no reply: the agent made no model call"
    )


def test_a_last_response_without_text_has_no_reply() -> None:
    traj = Trajectory([AssistantTurn(turn=1, text=None, tool_calls=())])
    (failure,) = failures(spec_of("assert: reply contains x"), traj)
    assert failure == (
        "line 8: assert reply contains x: there is no reply: the last model response has no text"
    )


# -- the structured form: the closest call and how it differs --------------------------------


def structured(body: str) -> FlowSpec:
    return parse_spec(f"{HEAD}steps:\n  - prompt: go\n  - {body}\n", "t.flow.yaml")


def test_a_call_whose_arguments_are_not_json_is_never_the_closest() -> None:
    spec = structured("assert_tool_call: {name: t, args: {city: Nairobi}}")
    traj = trajectory(call("t", raw="not json"), call("t", turn=2, city="Paris"))
    assert failures(spec, traj) == [
        'line 7: assert_tool_call t with args {"city":"Nairobi"}: t was called 2 time(s) but no '
        'call matched; the closest is call 2 (turn 2): city = "Paris" (expected "Nairobi"); its '
        'arguments: {"city": "Paris"}'
    ]


@pytest.mark.parametrize(
    ("args", "arguments", "difference"),
    [
        ("{city: Nairobi}", "[1, 2]", "the arguments = [1,2], not a mapping"),
        ("{FAX: {n: 1}}", '{"FAX": 5}', "FAX = 5, not a mapping"),
        ("{opts: {lang: en}}", '{"opts": "en"}', 'opts = "en", not a mapping'),
        ("{city: Nairobi}", '{"town": "x"}', 'city is absent (expected "Nairobi")'),
        (
            "{city: Nairobi, n: 2}",
            '{"city": "Paris", "n": 3}',
            'city = "Paris" (expected "Nairobi"), n = 3 (expected 2)',
        ),
    ],
)
def test_the_closest_call_says_how_its_arguments_differ(
    args: str, arguments: str, difference: str
) -> None:
    spec = structured(f"assert_tool_call: {{name: t, args: {args}}}")
    (failure,) = failures(spec, trajectory(call("t", raw=arguments)))
    assert f"the closest is call 1 (turn 1): {difference}; its arguments: {arguments}" in failure


# -- ending on a tool call: which argument the suggestion names ------------------------------


def ending_on(tool: ToolCall) -> str:
    (failure,) = failures(spec_of("assert: reply contains sunny"), trajectory(tool, reply=None))
    return failure


def test_a_final_answer_with_arguments_that_are_no_mapping_is_suggested_bare() -> None:
    assert ending_on(call("final_answer", raw="[1, 2]")) == (
        "line 8: assert reply contains sunny: there is no reply: the last model turn (turn 1) is "
        "a tool call (final_answer) with no text, so the agent gives its answer through "
        "final_answer. Fix: assert on that call instead: `assert_tool_call: final_answer`"
    )


def test_the_suggestion_prefers_the_answer_argument_then_the_first_text_one() -> None:
    answer = ending_on(call("final_answer", note="x", answer="It is sunny"))
    assert '(final_answer\'s answer is "It is sunny")' in answer
    assert "`assert_tool_call: final_answer where answer contains sunny`" in answer
    text = ending_on(call("final_result", n=2, city="Nairobi"))
    assert '(final_result\'s city is "Nairobi")' in text
    assert "`assert_tool_call: final_result where city contains sunny`" in text


def test_a_tool_named_for_an_answer_alone_is_an_answer_tool() -> None:
    assert "so the agent gives its answer through submit_answer" in ending_on(
        call("submit_answer", text="sunny")
    )


# -- variables, handles, and a spec built without lines ---------------------------------------


def test_a_handle_in_an_assertion_value_resolves_from_the_run() -> None:
    spec = spec_of("assert_tool_call: t where url equals ${flowproof.mcp_url}")
    traj = trajectory(call("t", url="http://127.0.0.1:5/mcp"))
    assert failures(spec, traj, handles={"mcp_url": "http://127.0.0.1:5/mcp"}) == []
    assert failures(spec, traj, handles={"mcp_url": "http://127.0.0.1:6/mcp"}) != []


def test_a_variable_inside_a_list_leaf_resolves() -> None:
    spec = structured("assert_tool_call: {name: t, args: {tags: ['${TAG}', b]}}")
    traj = trajectory(call("t", tags=["a", "b"]))
    assert failures(spec, traj, environ={"TAG": "a"}) == []
    assert failures(spec, traj, environ={"TAG": "z"}) != []


LINELESS = {
    "name": "t",
    "app": "agent",
    "agent": {"command": "run"},
    "steps": [
        {"prompt": "go"},
        {"assert_tool_call": "a"},
        {"assert_tool_call": "c"},
        {"assert": "reply contains ${WHO}"},
    ],
}


def test_a_spec_built_in_code_has_no_lines_and_its_messages_say_none() -> None:
    spec = FlowSpec.model_validate(LINELESS)
    assert failures(spec, trajectory(call("c"), call("a")), environ={"WHO": "done"}) == [
        "assert_tool_call c: c was called, but only before the call matched by the previous "
        "assertion (step 2). Fix the order of the steps, or the agent's"
    ]


def test_an_unset_variable_in_a_spec_without_lines_names_the_step_kind() -> None:
    with pytest.raises(ConfigError) as info:
        evaluate(FlowSpec.model_validate(LINELESS), trajectory(call("a"), call("c")), {})
    assert str(info.value).startswith(
        "environment variable WHO is not set (used in `assert` step)."
    )


# -- a regex that only a variable made invalid ------------------------------------------------


def test_a_regex_made_invalid_by_a_variable_is_a_spec_error_at_its_file_and_line() -> None:
    spec = spec_of(
        "assert_tool_call: t where a equals ${PAT}", "assert_tool_call: t where a matches ^${PAT}"
    )
    with pytest.raises(SpecError) as info:
        evaluate(spec, trajectory(call("t", a="(")), {"PAT": "("})
    assert str(info.value).startswith(
        "t.flow.yaml:9: after resolving variables, `matches ^(` is not a valid regular "
        "expression: missing ), unterminated subpattern at position 1. Fix: correct the regex"
    )
    assert (info.value.path, info.value.line) == ("t.flow.yaml", 9)


def test_a_variable_that_is_not_a_regex_is_compared_as_text() -> None:
    spec = spec_of("assert_tool_call: t where a equals ${PAT}")
    assert failures(spec, trajectory(call("t", a="(")), environ={"PAT": "("}) == []


def test_a_spec_built_in_code_reports_a_bad_resolved_regex_without_a_place() -> None:
    data = LINELESS | {"steps": [{"prompt": "go"}, {"assert_tool_call": "t where a matches ${P}"}]}
    with pytest.raises(SpecError) as info:
        evaluate(FlowSpec.model_validate(data), trajectory(call("t", a="x")), {"P": "("})
    assert str(info.value).startswith("after resolving variables, `matches (` is not a valid")
    assert (info.value.path, info.value.line) == (None, None)


# -- the run's subjects: each edge, and the whole text of each failure ---------------------------


def run_failures(step: str, output: str = "out\n", exit_code: int = 0, calls: int = 3) -> list[str]:
    spec = spec_of(f"assert: {step}")
    facts = RunFacts(output=output, exit_code=exit_code, model_calls=calls)
    return failures(spec, trajectory(), run=facts)


@pytest.mark.parametrize(
    ("step", "calls", "holds"),
    [
        ("model calls equals 3", 3, True),
        ("model calls equals 3", 2, False),
        ("model calls equals 3", 4, False),
        ("model calls at least 3", 3, True),
        ("model calls at least 3", 2, False),
        ("model calls at least 3", 4, True),
        ("model calls at most 3", 3, True),
        ("model calls at most 3", 4, False),
        ("model calls at most 3", 2, True),
        ("model calls equals 0", 0, True),
    ],
)
def test_model_calls_edges(step: str, calls: int, holds: bool) -> None:
    assert (run_failures(step, calls=calls) == []) is holds


@pytest.mark.parametrize(
    ("step", "code", "holds"),
    [
        ("exit code equals 0", 0, True),
        ("exit code equals 0", 1, False),
        ("exit code equals 1", 0, False),
        ("exit code equals -9", -9, True),
        ("exit code equals 9", -9, False),
    ],
)
def test_exit_code_edges(step: str, code: int, holds: bool) -> None:
    assert (run_failures(step, exit_code=code) == []) is holds


def test_output_is_searched_whole_and_case_sensitively() -> None:
    assert run_failures("output contains first", output="first\n" + "x\n" * 5000) == []
    assert run_failures("output contains First", output="first\n") != []
    assert run_failures("output matches fir.t", output="first\n") == []
    assert run_failures("output matches ^irst", output="first\n") != []


def test_the_whole_text_of_each_run_failure() -> None:
    assert run_failures("exit code equals 0", output="a\nb\n", exit_code=2) == [
        "line 8: assert exit code equals 0: the agent exited with code 2, expected 0; its "
        "output ends with:\na\nb"
    ]
    assert run_failures("exit code is 0", output="", exit_code=2) == [
        "line 8: assert exit code is 0: the agent exited with code 2, expected 0; it printed "
        "nothing"
    ]
    assert run_failures("model calls at most 1", calls=2) == [
        "line 8: assert model calls at most 1: the agent made 2 model call(s), expected at "
        "most 1 (every model request counts: retries and refused ones too)"
    ]
    assert run_failures("output matches ^b", output="a\nb") == [
        "line 8: assert output matches ^b: the agent's output does not match ^b; its output "
        "ends with:\na\nb"
    ]
    assert run_failures("output contains z", output=" \n") == [
        "line 8: assert output contains z: the agent printed nothing (its stdout and stderr are "
        'empty), so its output does not contain "z"'
    ]
