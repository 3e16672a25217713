"""The trajectory diff of two traces: what the agent did and what it was told, differently."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowproof_cli.cassette.turn import Turn
from flowproof_cli.errors import TraceError
from flowproof_cli.evidence.trace_view import without_minted
from flowproof_cli.evidence.trajectory_diff import UNCHANGED, Intent, diff_traces, intent_of
from flowproof_cli.mcp.lane import Call, Lane
from flowproof_cli.spec.loader import parse_spec
from flowproof_cli.trace import Trace
from tests.unit.trace_builders import (
    DEFAULT_TOOLS,
    TIME,
    WEATHER,
    anthropic_trace,
    chat_trace,
    tool,
)


def lines(old: Trace, new: Trace, intent: Intent | None = None) -> list[str]:
    return diff_traces(old, new, intent).lines()


ASSERTED_WEATHER = Intent(frozenset({"get_weather"}), frozenset({("get_weather", "city")}))


def test_minted_ids_alone_are_an_unchanged_trajectory() -> None:
    result = diff_traces(chat_trace(ids="a"), chat_trace(ids="zz"))
    assert result.unchanged
    assert result.lines() == [UNCHANGED]


def test_minted_tool_use_ids_are_not_compared() -> None:
    assert diff_traces(anthropic_trace(ids="1"), anthropic_trace(ids="2")).unchanged


def test_only_minted_ids_are_left_out() -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "book", "input": {"id": 7}}
    assert without_minted([block]) == [{"type": "tool_use", "name": "book", "input": {"id": 7}}]
    data = {"order": {"id": 1}, "tool_call_id": "call_1", "previous_response_id": "resp_1"}
    assert without_minted(data) == {"order": {"id": 1}}


def test_a_reorder_marks_the_asserted_call() -> None:
    intent = Intent(frozenset({"get_time"}))
    assert lines(chat_trace(), chat_trace(calls=(TIME, WEATHER)), intent) == [
        "what the agent did differently:",
        "  tool calls: get_weather, get_time (asserted) -> get_time (asserted), get_weather",
        "    * get_time (asserted): moved from call 2 to call 1",
        "what it was told differently:",
        "  messages:",
        '    + get_time result: {"ok": "get_time"}',
        '    - get_time result: {"ok": "get_time"}',
    ]


def test_an_added_call_names_its_place_and_the_count_of_model_calls_stays() -> None:
    visa = ("check_visa", '{"to": "KE"}')
    new = chat_trace(calls=(WEATHER, visa, TIME), tools=[*DEFAULT_TOOLS, tool("check_visa")])
    result = lines(chat_trace(), new)
    assert result[:3] == [
        "what the agent did differently:",
        "  tool calls: get_weather, get_time -> get_weather, check_visa, get_time",
        "    + check_visa: call 2, new",
    ]
    assert "  tools offered:" in result
    assert "    + check_visa" in result
    assert '    + check_visa result: {"ok": "check_visa"}' in result
    assert not any(line.strip().startswith("model calls") for line in result)


def test_a_removed_call_is_no_longer_made() -> None:
    result = lines(chat_trace(), chat_trace(calls=(WEATHER,)), ASSERTED_WEATHER)
    assert "    - get_time: call 2, no longer made" in result
    assert '    - get_time result: {"ok": "get_time"}' in result


def test_an_argument_change_is_a_path_marked_when_asserted() -> None:
    new = chat_trace(calls=(("get_weather", '{"city": "Paris"}'), TIME))
    result = lines(chat_trace(), new, ASSERTED_WEATHER)
    assert result[:2] == [
        "what the agent did differently:",
        "  get_weather.city: Nairobi -> Paris (asserted)",
    ]
    # Without the spec's intent the same change is shown, unmarked.
    assert "  get_weather.city: Nairobi -> Paris" in lines(chat_trace(), new)


def test_nested_argument_paths_and_repeated_tools() -> None:
    old_args = json.dumps({"flight": {"id": "KQ311"}, "seats": 1})
    new_args = json.dumps({"flight": {"id": "KQ999"}, "seats": 1, "note": "aisle"})
    old = chat_trace(calls=(("book", '{"flight": {"id": "X"}}'), ("book", old_args)))
    new = chat_trace(calls=(("book", '{"flight": {"id": "X"}}'), ("book", new_args)))
    intent = Intent(frozenset({"book"}), frozenset({("book", "flight.id")}))
    result = lines(old, new, intent)
    assert "  book[2].flight.id: KQ311 -> KQ999 (asserted)" in result
    assert "  book[2].note: added (aisle)" in result


def test_spacing_only_argument_change_says_so() -> None:
    new = chat_trace(calls=(("get_weather", '{"city":"Nairobi"}'), TIME))
    assert "  get_weather: the same arguments, spaced or ordered differently" in lines(
        chat_trace(), new
    )


def test_arguments_that_are_not_json_are_shown_whole() -> None:
    old = chat_trace(calls=(("run", "ls -la"),))
    new = chat_trace(calls=(("run", "ls -l"),))
    assert "  run arguments: ls -la -> ls -l" in lines(old, new)


def test_a_new_tool_schema_names_the_field_path() -> None:
    new = chat_trace(tools=[tool("get_weather", city="integer"), tool("get_time")])
    result = lines(chat_trace(), new, ASSERTED_WEATHER)
    assert result == [
        "what the agent did differently:",
        "  nothing",
        "what it was told differently:",
        "  tools offered:",
        "    ~ get_weather (asserted): its declaration changed",
        "      get_weather.function.parameters.properties.city.type: string -> integer",
    ]


def test_a_changed_system_prompt() -> None:
    new = chat_trace(system="You are a terse weather assistant.")
    assert lines(chat_trace(), new) == [
        "what the agent did differently:",
        "  nothing",
        "what it was told differently:",
        "  system prompt: You are a weather assistant. -> You are a terse weather assistant.",
    ]


def test_a_long_system_prompt_shows_where_it_differs() -> None:
    base = "You are a weather assistant. " * 6
    result = lines(chat_trace(system=base + "Be brief."), chat_trace(system=base + "Be terse."))
    assert result[3].startswith("  system prompt: differs at char 177 of 183: ")
    assert result[3].endswith(
        '..."You are a weather assistant. Be brief." -> ..."You are a weather assistant. Be terse."'
    )


def test_a_multi_line_prompt_shows_the_changed_lines() -> None:
    tail = "\nLine three, which is long enough that the whole prompt is not shown on one line."
    old = chat_trace(system="Line one.\nLine two." + tail)
    new = chat_trace(system="Line one.\nLine 2." + tail)
    result = lines(old, new)
    assert result[3] == "  system prompt: differs at line 2 of 3"
    assert "    - 2  Line two." in result
    assert "    + 2  Line 2." in result


def test_model_reply_and_user_message() -> None:
    new = chat_trace(model="gpt-4o", reply="Sunny.", user="Weather in Paris? Use both tools.")
    result = lines(chat_trace(), new)
    assert "  reply: It is sunny in Nairobi. -> Sunny." in result
    assert "  model: gpt-4o-mini -> gpt-4o" in result
    assert (
        "    ~ user message: What's the weather in Nairobi? Use both tools. -> "
        "Weather in Paris? Use both tools." in result
    )


def test_the_number_of_model_calls() -> None:
    new = chat_trace()
    new.turns.append(new.turns[-1])
    assert "  model calls: 2 -> 3" in lines(chat_trace(), new)


def test_mocks_match_rules_and_parameters() -> None:
    old = chat_trace(mocks={"get_time": {"now": "09:00"}})
    new = chat_trace(mocks={"get_time": {"now": "10:00"}}, match=[{"ignore": "metadata"}])
    new.turns[0].request["temperature"] = 0.2
    result = lines(old, new)
    assert "  mocks.get_time.now: 09:00 -> 10:00" in result
    assert '  match rules: + {"ignore":"metadata"}' in result
    assert "  request parameters: 1 distinct -> 2 distinct" in result
    assert '    + {"temperature": 0.2}' in result


def test_mcp_calls_added_removed_and_changed() -> None:
    def lane(*calls: tuple[str, dict[str, Any]]) -> Lane:
        return Lane(
            calls=[
                Call("tools/call", {"name": name, "arguments": args}, {"content": []}, None, True)
                for name, args in calls
            ]
        )

    old = chat_trace(mcp={"notes": lane(("read", {"path": "a"})), "old": lane(("x", {}))})
    new = chat_trace(
        mcp={"notes": lane(("read", {"path": "b"}), ("write", {"path": "b"})), "fresh": lane()}
    )
    result = lines(old, new)
    assert "  mcp fresh: new server (0 call(s))" in result
    assert "  mcp notes calls: 1 -> 2" in result
    assert "    + tools/call write: call 2, new" in result
    assert "  mcp notes tools/call read: arguments.path: a -> b" in result
    assert "  mcp old: no longer in the trace (it had 1 call(s))" in result


def test_an_mcp_call_moved_to_another_conversation_turn() -> None:
    def lane(turn: int) -> Lane:
        return Lane([Call("tools/list", None, {}, answered=True, conversation_turn=turn)])

    result = lines(chat_trace(mcp={"notes": lane(1)}), chat_trace(mcp={"notes": lane(2)}))
    assert "  mcp notes tools/list: call 1 moved from conversation turn 1 to 2" in result


def test_egress_blocked_destinations() -> None:
    blocked = [{"destination": "203.0.113.7:443", "protocol": "tcp", "at_ms": 5}]
    moved = [{"destination": "203.0.113.7:443", "protocol": "tcp", "at_ms": 90}]
    assert diff_traces(
        chat_trace(egress_blocked=blocked), chat_trace(egress_blocked=moved)
    ).unchanged
    result = lines(chat_trace(), chat_trace(egress_blocked=blocked))
    assert "  egress blocked: + 203.0.113.7:443 (tcp), new" in result


def test_output_is_deterministic() -> None:
    new = chat_trace(calls=(TIME, ("check_visa", "{}")), system="Other.", model="gpt-4o")
    assert lines(chat_trace(), new) == lines(chat_trace(), new)


def test_an_unknown_protocol_names_the_trace_and_turn() -> None:
    broken = chat_trace()
    broken.turns[1] = Turn("carrier-pigeon", {}, 200, {})
    with pytest.raises(
        TraceError, match=r"new\.trace\.yaml: turn 2: unknown protocol 'carrier-pigeon'"
    ):
        diff_traces(chat_trace(), broken, new_source="new.trace.yaml")


def test_intent_of_a_spec_reads_both_tool_assertions() -> None:
    spec = parse_spec(
        "name: w\napp: agent\nagent: {command: x}\nsteps:\n"
        "  - prompt: go\n"
        "  - assert_tool_call: book where flight.id equals KQ311 and seats exists\n"
        "  - assert_no_tool_call: refund\n",
        "w.flow.yaml",
    )
    intent = intent_of(spec)
    assert intent.tools == {"book", "refund"}
    assert intent.paths == {("book", "flight.id"), ("book", "seats")}
    assert intent.path_mark("book", "flight.id.code") == " (asserted)"
    assert intent.path_mark("book", "flight") == " (asserted)"
    assert intent.path_mark("book", "note") == ""
    assert intent.path_mark("refund", "flight.id") == ""
