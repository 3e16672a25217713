"""`flowproof show`'s timeline: turns with their new messages and answers, MCP lanes with the
server's own messages where they crossed, and blocked egress."""

from __future__ import annotations

from typing import Any

import pytest

from flowproof_cli.cassette.turn import Turn
from flowproof_cli.errors import TraceError
from flowproof_cli.evidence.timeline import timeline
from flowproof_cli.mcp.lane import Call, Lane, ServerEvent
from flowproof_cli.trace import Trace
from tests.unit.trace_builders import anthropic_trace, chat_trace

BLOCKED = [{"destination": "203.0.113.7:443", "protocol": "tcp", "at_ms": 412}]


def notes_lane() -> Lane:
    text = {"content": [{"type": "text", "text": "hi"}]}
    return Lane(
        calls=[
            Call("tools/call", {"name": "read_note", "arguments": {"id": 1}}, text, None, True),
            Call(
                "tools/call",
                {"name": "write_note", "arguments": {"t": "x"}},
                "ok",
                None,
                True,
                True,
            ),
            Call("tools/list", None, None, {"code": -32601, "message": "nope"}, True),
            Call("tools/call", {"name": "slow", "arguments": {}}),
        ],
        server=[
            ServerEvent(after=0, notification={"method": "notifications/message", "params": {}}),
            ServerEvent(after=0, during=1, notification={"method": "notifications/progress"}),
            ServerEvent(
                after=2,
                request={"method": "sampling/createMessage", "params": {"n": 1}},
                answer={"result": {"ok": True}},
            ),
        ],
    )


def test_a_trace_with_mcp_lanes_and_blocked_egress() -> None:
    trace = chat_trace(
        mocks={"get_time": {"now": "09:00"}}, mcp={"notes": notes_lane()}, egress_blocked=BLOCKED
    )
    assert timeline(trace, "w.trace.yaml") == [
        "w.trace.yaml: weather",
        "mocked tools: get_time",
        "turn 1: openai-chat, model gpt-4o-mini, 2 tool(s) offered (get_weather, get_time)",
        "  system: You are a weather assistant.",
        "  user: What's the weather in Nairobi? Use both tools.",
        '  -> get_weather {"city": "Nairobi"}',
        "  -> get_time {}",
        "turn 2: openai-chat, model gpt-4o-mini, the same tools",
        '  get_weather result: {"ok": "get_weather"}',
        '  get_time result (mocked): {"ok": "get_time"}',
        "  reply: It is sunny in Nairobi.",
        "mcp notes: 4 call(s)",
        "  before any call: notification notifications/message {}",
        '  1. tools/call read_note {"id": 1}',
        '     result: {"content": [{"type": "text", "text": "hi"}]}',
        "     during call 1: notification notifications/progress",
        '  2. tools/call write_note {"t": "x"} (mocked)',
        "     result: ok",
        '  after 2 call(s): request sampling/createMessage {"n": 1}, answered {"result": {"ok": true}}',
        "  3. tools/list",
        '     error: {"code": -32601, "message": "nope"}',
        "  4. tools/call slow {}",
        "     never answered",
        "egress blocked: 1 destination(s)",
        "  203.0.113.7:443 tcp, 412 ms after the agent started",
    ]


def test_an_mcp_call_of_a_conversation_names_its_turn() -> None:
    lane = Lane([Call("tools/list", None, {}, answered=True, conversation_turn=2)])
    lines = timeline(chat_trace(mcp={"notes": lane}), "w.trace.yaml")
    assert "  1. tools/list (conversation turn 2)" in lines


def test_a_side_conversation_and_an_error_answer() -> None:
    trace = chat_trace()
    side = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "Title it."}]}
    trace.turns.insert(1, Turn("openai-chat", side, 429, {"error": {"message": "slow down"}}))
    lines = timeline(trace, "w.trace.yaml")
    assert lines[6:9] == [
        "turn 2: openai-chat, model gpt-4o-mini, no tools",
        "  system: Title it.",
        '  answered status 429: {"error": {"message": "slow down"}}',
    ]
    # Turn 3 continues turn 1, not the side call: only its tool results are new.
    assert lines[9:11] == [
        "turn 3: openai-chat, model gpt-4o-mini, 2 tool(s) offered (get_weather, get_time)",
        '  get_weather result: {"ok": "get_weather"}',
    ]
    assert lines[-1] == "  reply: It is sunny in Nairobi."


def test_anthropic_tool_results_are_named_by_their_call() -> None:
    assert timeline(anthropic_trace(), "c.trace.yaml")[2:] == [
        "turn 1: anthropic, model claude-x, 1 tool(s) offered (get_time)",
        "  system: Be brief.",
        "  user: What time is it?",
        '  -> get_time {"tz":"UTC"}',
        "turn 2: anthropic, model claude-x, the same tools",
        "  get_time result (mocked): 09:00",
        "  user: Thanks.",
        "  reply: It is 9.",
    ]


def test_gemini_function_responses_carry_their_name() -> None:
    call = {"functionCall": {"name": "get_time", "args": {}}}
    answer = {"functionResponse": {"name": "get_time", "response": {"now": "09:00"}}}
    ask = {"role": "user", "parts": [{"text": "Time?"}]}
    history = [ask, {"role": "model", "parts": [call]}, {"role": "user", "parts": [answer]}]
    trace = Trace(
        flow="clock",
        turns=[
            Turn("gemini", {"model": "gemini-x", "contents": [ask]}, 200, _candidate(call)),
            Turn(
                "gemini",
                {"model": "gemini-x", "contents": history},
                200,
                _candidate({"text": "9."}),
            ),
        ],
    )
    lines = timeline(trace, "g.trace.yaml")
    assert '  get_time result: {"now": "09:00"}' in lines
    assert lines[-1] == "  reply: 9."


def _candidate(part: dict[str, Any]) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [part]}}]}


def test_an_empty_trace_says_so() -> None:
    assert timeline(Trace(flow="nothing"), "n.trace.yaml") == [
        "n.trace.yaml: nothing",
        "no model turns",
    ]


def test_an_unknown_protocol_names_the_file_and_turn() -> None:
    trace = Trace(flow="x", turns=[Turn("telegraph", {}, 200, {})])
    with pytest.raises(TraceError, match=r"x\.trace\.yaml: turn 1: unknown protocol 'telegraph'"):
        timeline(trace, "x.trace.yaml")
