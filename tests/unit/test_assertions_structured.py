"""The structured tool assertions (`{name, args | args_exact, times}`, `{call, times}`):
matching, counting, failure messages that show the closest call, and the load errors."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.assertions import evaluate
from flowproof_cli.errors import SpecError
from flowproof_cli.spec import FlowSpec, ToolCallStep, parse_spec
from flowproof_cli.trajectory import AssistantTurn, ToolCall, Trajectory
from tests.conftest import run_cli

HEAD = "name: t\napp: agent\nagent:\n  command: run\n"


def spec_of(steps: str, extra: str = "") -> FlowSpec:
    body = textwrap.dedent(steps)
    indented = "".join(f"  {line}\n" for line in body.splitlines())
    return parse_spec(f"{HEAD}{extra}steps:\n  - prompt: go\n{indented}", "t.flow.yaml")


def call(name: str, turn: int = 1, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, raw_arguments=json.dumps(arguments), turn=turn)


def trajectory(*calls: ToolCall) -> Trajectory:
    turns = [AssistantTurn(turn=i + 1, text=None, tool_calls=(c,)) for i, c in enumerate(calls)]
    turns.append(AssistantTurn(turn=len(turns) + 1, text="done", tool_calls=()))
    return Trajectory(turns=turns)


def failures(spec: FlowSpec, traj: Trajectory, environ: dict[str, str] | None = None) -> list[str]:
    return [str(failure) for failure in evaluate(spec, traj, environ or {})]


BOOKING = call("create_booking", flight={"id": "KQ311", "date": "2026-03-01"}, seats=2)


# --- args: partial, with the semantics of `where ... equals` ---------------------------------


@pytest.mark.parametrize(
    ("args", "passes"),
    [
        ("{flight: {id: KQ311}}", True),
        ("{flight: {id: KQ311, date: '2026-03-01'}, seats: 2}", True),
        ("{seats: 2.0}", True),  # numbers compare numerically, as `equals 2.0`
        ("{seats: '2'}", True),  # a text leaf is the prose VALUE `2`
        ("{}", True),  # no leaf given: any call of the tool
        ("{flight: {id: KQ312}}", False),
        ("{flight: {gate: A1}}", False),  # a leaf whose path does not resolve
        ("{flight: KQ311}", False),  # a text leaf against a mapping argument
        ("{seats: true}", False),  # booleans never equal numbers
    ],
)
def test_args_is_a_partial_match(args: str, passes: bool) -> None:
    spec = spec_of(f"- assert_tool_call: {{name: create_booking, args: {args}}}")
    assert (failures(spec, trajectory(BOOKING)) == []) is passes


def test_a_list_leaf_compares_whole() -> None:
    traj = trajectory(call("tag", labels=["a", "b"]))
    assert failures(spec_of("- assert_tool_call: {name: tag, args: {labels: [a, b]}}"), traj) == []
    failed = failures(spec_of("- assert_tool_call: {name: tag, args: {labels: [a]}}"), traj)
    assert failed == [
        'line 7: assert_tool_call tag with args {"labels":["a"]}: tag was called 1 time(s) but '
        'no call matched; the closest is call 1 (turn 1): labels = ["a","b"] (expected ["a"]); '
        'its arguments: {"labels": ["a", "b"]}'
    ]


def test_args_exact_allows_no_other_argument() -> None:
    exact = "- assert_tool_call: {name: create_booking, args_exact: %s}"
    whole = "{flight: {id: KQ311, date: '2026-03-01'}, seats: 2}"
    assert failures(spec_of(exact % whole), trajectory(BOOKING)) == []
    failed = failures(spec_of(exact % "{flight: {id: KQ311}}"), trajectory(BOOKING))
    assert len(failed) == 1
    assert 'flight.date = "2026-03-01" is not expected (args_exact)' in failed[0]
    assert "seats = 2 is not expected (args_exact)" in failed[0]


def test_the_failure_shows_the_closest_call_and_its_diff() -> None:
    traj = trajectory(
        call("create_booking", flight={"id": "BA001"}, seats=1),
        call("create_booking", turn=2, flight={"id": "KQ312"}, seats=2),
    )
    spec = spec_of(
        "- assert_tool_call: {name: create_booking, args: {flight: {id: KQ311}, seats: 2}}"
    )
    assert failures(spec, traj) == [
        'line 7: assert_tool_call create_booking with args {"flight":{"id":"KQ311"},"seats":2}: '
        "create_booking was called 2 time(s) but no call matched; the closest is call 2 (turn 2): "
        'flight.id = "KQ312" (expected "KQ311"); its arguments: '
        '{"flight": {"id": "KQ312"}, "seats": 2}'
    ]


def test_a_never_called_tool_says_what_was_called() -> None:
    spec = spec_of("- assert_tool_call: {name: create_booking, args: {seats: 2}}")
    assert failures(spec, trajectory(call("search"))) == [
        'line 7: assert_tool_call create_booking with args {"seats":2}: create_booking was never '
        "called; tools called, in order: search. Check the tool name and the prompt"
    ]


def test_variables_resolve_in_text_leaves() -> None:
    spec = spec_of("- assert_tool_call: {name: create_booking, args: {flight: {id: '${FLIGHT}'}}}")
    assert failures(spec, trajectory(BOOKING), {"FLIGHT": "KQ311"}) == []
    assert failures(spec, trajectory(BOOKING), {"FLIGHT": "KQ999"}) != []


def test_structured_steps_keep_their_order() -> None:
    spec = spec_of(
        """\
        - assert_tool_call: {name: search}
        - assert_tool_call: {name: create_booking, args: {seats: 2}}
        """
    )
    assert failures(spec, trajectory(call("search"), BOOKING)) == []
    reversed_order = failures(spec, trajectory(BOOKING, call("search", turn=2)))
    assert len(reversed_order) == 1
    assert "only before the call matched by the previous assertion" in reversed_order[0]


# --- assert_no_tool_call ----------------------------------------------------------------------


def test_assert_no_tool_call_takes_the_structured_form() -> None:
    spec = spec_of("- assert_no_tool_call: {name: create_booking, args: {flight: {id: KQ311}}}")
    assert failures(spec, trajectory(call("create_booking", flight={"id": "BA001"}))) == []
    assert failures(spec, trajectory(BOOKING)) == [
        'line 7: assert_no_tool_call create_booking with args {"flight":{"id":"KQ311"}}: '
        "create_booking was called at position 1 of 1 (turn 1) with arguments "
        '{"flight": {"id": "KQ311", "date": "2026-03-01"}, "seats": 2}'
    ]


# --- times ------------------------------------------------------------------------------------

TWO_KYOTO = trajectory(
    call("get_weather", city="Kyoto"),
    call("get_weather", turn=2, city="Osaka"),
    call("get_weather", turn=3, city="Kyoto"),
)


@pytest.mark.parametrize(
    ("step", "passes"),
    [
        ("{call: get_weather where city equals Kyoto, times: 2}", True),
        ("{call: get_weather, times: 3}", True),
        ("{name: get_weather, args: {city: Kyoto}, times: 2}", True),
        ("{name: get_weather, args: {city: Osaka}, times: 1}", True),
        ("{call: get_weather where city equals Kyoto, times: 1}", False),
        ("{name: get_weather, times: 4}", False),
    ],
)
def test_times_counts_the_matching_calls(step: str, passes: bool) -> None:
    assert (failures(spec_of(f"- assert_tool_call: {step}"), TWO_KYOTO) == []) is passes


def test_a_wrong_count_names_what_was_seen() -> None:
    spec = spec_of("- assert_tool_call: {call: get_weather where city equals Kyoto, times: 1}")
    assert failures(spec, TWO_KYOTO) == [
        "line 7: assert_tool_call get_weather where city equals Kyoto (times: 1): expected 1 "
        "matching call(s), saw 2: at position(s) 1 (turn 1), 3 (turn 3) of 3 tool call(s)"
    ]
    none = spec_of("- assert_tool_call: {call: get_weather where city equals Lima, times: 2}")
    (message,) = failures(none, TWO_KYOTO)
    assert "expected 2 matching call(s), saw none: get_weather was called 3 time(s)" in message
    assert 'call 1 city = "Kyoto"' in message


def test_strict_counts_every_call_times_asserted() -> None:
    spec = spec_of(
        "- assert_tool_call: {call: get_weather where city equals Kyoto, times: 2}\n"
        "- assert_tool_call: get_weather where city equals Osaka\n",
        extra="strict: true\n",
    )
    assert failures(spec, TWO_KYOTO) == []


# --- the model and its dump -------------------------------------------------------------------


def test_the_prose_form_is_unchanged_and_dumps_as_text() -> None:
    spec = spec_of("- assert_tool_call: get_weather where city equals Kyoto")
    step = spec.steps[1]
    assert isinstance(step, ToolCallStep)
    assert step.text == "get_weather where city equals Kyoto"
    assert step.assertion.tool == "get_weather" and step.assertion.args is None
    dumped = spec.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped["steps"][1] == {"assert_tool_call": "get_weather where city equals Kyoto"}
    structured = spec_of("- assert_tool_call: {name: a, args: {x: 1}, times: 2}")
    dumped = structured.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped["steps"][1] == {"assert_tool_call": {"name": "a", "args": {"x": 1}, "times": 2}}


# --- red paths: exit 2 with FILE:LINE and a fix -----------------------------------------------

STRUCTURED_ERRORS = [
    (
        "{name: a, argz: {x: 1}}",
        7,
        "unknown key `argz` in the tool assertion. Did you mean `args`? Fix: use one of the "
        "allowed keys: name, call, args, args_exact, times",
    ),
    (
        "\n      name: a\n      args: [x]",
        9,
        "`args` must be a mapping of argument names to values, got list. Fix: write e.g. "
        "`args: {city: Nairobi}`",
    ),
    (
        "\n      name: a\n      args_exact: x",
        9,
        "`args_exact` must be a mapping of argument names to values, got str.",
    ),
    (
        "\n      name: a\n      times: 0",
        9,
        "`times` must be a whole number of calls >= 1, got 0. Fix: write e.g. `times: 2`; to "
        "assert that no call matches, use `assert_no_tool_call` instead",
    ),
    ("{name: a, times: -1}", 7, "`times` must be a whole number of calls >= 1, got -1."),
    ("{name: a, times: true}", 7, "`times` must be a whole number of calls >= 1, got True."),
    ("{name: a, times: '2'}", 7, "`times` must be a whole number of calls >= 1, got '2'."),
    ("{args: {x: 1}}", 7, "a tool assertion mapping needs exactly one of `name`"),
    (
        "\n      name: a\n      call: a",
        9,
        "a tool assertion mapping needs exactly one of `name` (the structured form) and `call` "
        "(the prose form); it has both.",
    ),
    (
        "\n      name: a\n      args: {}\n      args_exact: {}",
        10,
        "a tool assertion has both `args` (partial) and `args_exact` (exact). Fix: keep one",
    ),
    (
        "\n      call: a where x equals 1\n      args: {x: 1}",
        9,
        "`args` goes with `name`, not with the prose `call`.",
    ),
    ("{name: get weather}", 7, "the tool name `get weather` has a space."),
    ("{call: a where x near 1}", 7, "unknown matcher `near` in `x near 1`."),
    ("[a]", 7, "a tool assertion is the prose text or a mapping, got list."),
]


@pytest.mark.parametrize(("value", "line", "message"), STRUCTURED_ERRORS)
def test_bad_structured_assertions_name_the_line_and_the_fix(
    value: str, line: int, message: str
) -> None:
    with pytest.raises(SpecError) as caught:
        spec_of(f"- assert_tool_call: {value}")
    assert caught.value.line == line, str(caught.value)
    assert message in caught.value.detail


def test_times_on_assert_no_tool_call_is_refused() -> None:
    with pytest.raises(SpecError) as caught:
        spec_of("- assert_no_tool_call:\n    name: a\n    times: 2")
    assert caught.value.line == 9
    assert caught.value.detail.startswith(
        "`times` does not apply to `assert_no_tool_call`, which already means no call matches."
    )


def test_an_undeclared_tool_in_the_structured_form_is_refused() -> None:
    with pytest.raises(SpecError) as caught:
        spec_of("- assert_tool_call: {name: get_wether}", extra="tools:\n  - name: get_weather\n")
    assert "names tool `get_wether`, which is not declared under `tools`" in caught.value.detail
    assert caught.value.line == 9


def test_the_cli_exits_2_with_file_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "bad.flow.yaml"
    path.write_text(
        f"{HEAD}steps:\n  - prompt: go\n  - assert_tool_call:\n      name: a\n      times: 0\n"
    )
    result = run_cli("run", path)
    assert result.code == 2, result.output
    assert f"{path}:9: `times` must be a whole number of calls >= 1, got 0. Fix:" in result.stderr
