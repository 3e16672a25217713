"""The Anthropic Messages dialect: canonical form, mocks, trajectory, outline, rendering."""

from __future__ import annotations

import copy
import json
from typing import Any

import anthropic
import httpx2 as httpx  # anthropic 2.x runs on httpx2 and rejects `httpx` objects
import pytest

from flowproof_cli.cassette import divergence
from flowproof_cli.dialects.anthropic import AnthropicMessages
from flowproof_cli.dialects.base import MessageOutline
from flowproof_cli.trajectory import AssistantTurn, ToolCall

CLAUDE = AnthropicMessages()

LONG_TEXT = (
    "The weather in Nairobi is sunny with a light breeze, 24 degrees Celsius, "
    "and no rain is expected before the evening. Ünïcödé stays intact."
)
WEATHER_INPUT: dict[str, Any] = {
    "city": "Nairobi",
    "unit": "celsius",
    "detail": "hourly forecast",
    "days": [1, 2, 3],
}
THINKING = "The user wants the weather; I should call get_weather for Nairobi first."

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    {"name": "get_time", "input_schema": {"type": "object"}},
]


def tool_use(call_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def tool_result(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def response(
    content: list[dict[str, Any]], stop_reason: str = "end_turn", **extra: Any
) -> dict[str, Any]:
    return {
        "id": "msg_01ABC",
        "type": "message",
        "role": "assistant",
        "model": "claude-flowproof-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 42,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 7,
            "output_tokens": 31,
        },
        **extra,
    }


# --- canonical_request --------------------------------------------------------------------


def test_canonical_request_drops_only_stream() -> None:
    body = {
        "model": "claude-flowproof-test",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}],
        "tools": TOOLS,
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "u-1"},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "stream": True,
    }
    original = copy.deepcopy(body)
    expected = {key: value for key, value in original.items() if key != "stream"}
    assert CLAUDE.canonical_request(body) == expected
    assert body == original


def test_name_and_routes() -> None:
    assert CLAUDE.name == "anthropic"
    assert CLAUDE.route_suffixes == ("messages",)
    assert CLAUDE.wants_stream({"stream": True}) is True
    assert CLAUDE.wants_stream({}) is False


# --- apply_mocks --------------------------------------------------------------------------


def mocked_conversation() -> dict[str, Any]:
    return {
        "model": "claude-flowproof-test",
        "max_tokens": 512,
        "system": "You are helpful.",
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    tool_use("toolu_1", "get_weather", {"city": "Nairobi"}),
                    tool_use("toolu_2", "get_time", {}),
                    tool_use("toolu_3", "get_weather", {"city": "Paris"}),
                ],
            },
            {
                "role": "user",
                "content": [
                    tool_result("toolu_1", "real weather 1"),
                    tool_result("toolu_2", "real time"),
                    tool_result(
                        "toolu_3",
                        [{"type": "text", "text": "real weather 3"}],
                        is_error=True,
                    ),
                    {"type": "text", "text": "also, hurry"},
                ],
            },
            {"role": "assistant", "content": [tool_use("toolu_4", "get_weather", {"city": "L"})]},
            {
                "role": "user",
                "content": [
                    tool_result("toolu_4", [{"type": "text", "text": "real weather 4"}]),
                    tool_result("toolu_unknown", "orphan result"),
                ],
            },
            {"role": "user", "content": "thanks"},
        ],
    }


def result_contents(body: dict[str, Any]) -> dict[str, Any]:
    return {
        block["tool_use_id"]: block["content"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    }


def test_apply_mocks_replaces_every_result_of_a_mocked_tool() -> None:
    body = mocked_conversation()
    original = copy.deepcopy(body)
    mocked = CLAUDE.apply_mocks(body, {"get_weather": '{"temp":21}'}, {})

    assert result_contents(mocked) == {
        "toolu_1": '{"temp":21}',
        "toolu_2": "real time",
        "toolu_3": '{"temp":21}',
        "toolu_4": '{"temp":21}',
        "toolu_unknown": "orphan result",
    }
    # Other fields of a mocked result survive.
    assert mocked["messages"][2]["content"][2] == {
        "type": "tool_result",
        "tool_use_id": "toolu_3",
        "content": '{"temp":21}',
        "is_error": True,
    }
    # Everything but the mocked contents is as sent.
    assert mocked["messages"][2]["content"][3] == {"type": "text", "text": "also, hurry"}
    for position in (0, 1, 3, 5):
        assert mocked["messages"][position] == original["messages"][position]
    assert {k: v for k, v in mocked.items() if k != "messages"} == {
        k: v for k, v in original.items() if k != "messages"
    }
    # The input is not mutated.
    assert body == original


def test_apply_mocks_with_several_mocked_tools() -> None:
    mocked = CLAUDE.apply_mocks(
        mocked_conversation(), {"get_weather": '"w"', "get_time": '"12:00"'}, {}
    )
    assert result_contents(mocked) == {
        "toolu_1": '"w"',
        "toolu_2": '"12:00"',
        "toolu_3": '"w"',
        "toolu_4": '"w"',
        "toolu_unknown": "orphan result",
    }


def test_apply_mocks_leaves_non_mocked_tools_alone() -> None:
    body = mocked_conversation()
    assert CLAUDE.apply_mocks(body, {"search": '"x"'}, {}) == mocked_conversation()
    assert CLAUDE.apply_mocks(body, {}, {}) == mocked_conversation()


def test_apply_mocks_without_messages_is_identity() -> None:
    assert CLAUDE.apply_mocks({"model": "m"}, {"get_weather": "1"}, {}) == {"model": "m"}


def test_apply_mocks_ignores_tool_results_outside_user_messages() -> None:
    body = {
        "messages": [
            {"role": "assistant", "content": [tool_use("toolu_1", "get_weather", {})]},
            {"role": "assistant", "content": [tool_result("toolu_1", "odd")]},
        ]
    }
    assert CLAUDE.apply_mocks(body, {"get_weather": '"m"'}, {}) == body


def test_apply_mocks_uses_known_calls_from_earlier_responses() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "user",
                "content": [tool_result("toolu_old", "real"), tool_result("toolu_other", "kept")],
            },
        ],
    }
    known = {"toolu_old": "get_weather", "toolu_other": "get_time"}
    mocked = CLAUDE.apply_mocks(body, {"get_weather": '"mocked"'}, known)
    assert mocked["messages"][0] == {"role": "user", "content": "go"}
    assert result_contents(mocked) == {"toolu_old": '"mocked"', "toolu_other": "kept"}
    assert known == {"toolu_old": "get_weather", "toolu_other": "get_time"}


def test_call_names_of_a_response() -> None:
    resp = response(
        [tool_use("toolu_a", "get_weather", {}), tool_use("toolu_b", "get_time", {})], "tool_use"
    )
    assert CLAUDE.call_names(resp) == {"toolu_a": "get_weather", "toolu_b": "get_time"}
    assert CLAUDE.call_names(response([{"type": "text", "text": "hi"}])) == {}


# --- assistant_turn -----------------------------------------------------------------------


def test_assistant_turn_extracts_calls_text_and_thread_key() -> None:
    request = {
        "model": "claude-flowproof-test",
        "system": [
            {"type": "text", "text": "You are a weather bot."},
            {"type": "text", "text": "Be brief."},
        ],
        "messages": [{"role": "user", "content": "weather?"}],
    }
    resp = response(
        [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Checking "},
            tool_use("toolu_a", "get_weather", {"unit": "c", "city": "Nairobi é"}),
            {"type": "text", "text": "now."},
            tool_use("toolu_b", "get_time", {}),
        ],
        "tool_use",
    )
    turn = CLAUDE.assistant_turn(request, resp, 3)
    assert turn == AssistantTurn(
        turn=3,
        text="Checking now.",
        tool_calls=(
            ToolCall("get_weather", '{"city":"Nairobi é","unit":"c"}', 3, "toolu_a"),
            ToolCall("get_time", "{}", 3, "toolu_b"),
        ),
        thread_key="You are a weather bot.\nBe brief.",
        request_size=len(json.dumps(request["messages"])) + len(json.dumps(request["system"])),
    )


def test_assistant_turn_with_string_system_and_no_text() -> None:
    request = {"system": "Title generator.", "messages": [{"role": "user", "content": "x"}]}
    turn = CLAUDE.assistant_turn(request, response([tool_use("t", "get_time", {})]), 1)
    assert turn.text is None
    assert turn.thread_key == "Title generator."
    assert turn.request_size == len(json.dumps(request["messages"])) + len('"Title generator."')
    assert [c.name for c in turn.tool_calls] == ["get_time"]


def test_assistant_turn_without_system_or_content() -> None:
    turn = CLAUDE.assistant_turn({"messages": []}, {"content": []}, 2)
    assert turn == AssistantTurn(turn=2, text=None, tool_calls=(), thread_key="", request_size=2)


def test_assistant_turn_empty_text_block_is_empty_text() -> None:
    turn = CLAUDE.assistant_turn({}, response([{"type": "text", "text": ""}]), 1)
    assert turn.text == ""


# --- outline ------------------------------------------------------------------------------


def outline_request(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "claude-flowproof-test",
        "max_tokens": 1024,
        "temperature": 0,
        "system": "You are a weather bot.",
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    tool_use("toolu_1", "get_weather", {"unit": "c", "city": "Nairobi"}),
                ],
            },
            {"role": "user", "content": [tool_result("toolu_1", "sunny")]},
        ],
    }
    request.update(overrides)
    return request


def test_outline_puts_the_system_prompt_first() -> None:
    request = outline_request()
    outline = CLAUDE.outline(request)
    assert outline.model == "claude-flowproof-test"
    assert outline.tools == {"get_weather": TOOLS[0], "get_time": TOOLS[1]}
    assert outline.messages == (
        MessageOutline("system", "You are a weather bot."),
        MessageOutline("user", "weather?"),
        MessageOutline(
            "assistant",
            request["messages"][1]["content"],
            (("get_weather", '{"city":"Nairobi","unit":"c"}'),),
        ),
        MessageOutline("user", [tool_result("toolu_1", "sunny")]),
    )
    assert outline.parameters == {"max_tokens": 1024, "temperature": 0}


def test_outline_keeps_system_blocks_and_omits_absent_system() -> None:
    blocks = [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]
    assert CLAUDE.outline(outline_request(system=blocks)).messages[0] == MessageOutline(
        "system", blocks
    )
    request = outline_request()
    del request["system"]
    outline = CLAUDE.outline(request)
    assert [m.role for m in outline.messages] == ["user", "assistant", "user"]
    assert "system" not in outline.parameters


def test_outline_parameters_exclude_envelope_fields() -> None:
    request = outline_request(tool_choice={"type": "any"}, metadata={"user_id": "x"})
    assert CLAUDE.outline(request).parameters == {
        "max_tokens": 1024,
        "temperature": 0,
        "tool_choice": {"type": "any"},
        "metadata": {"user_id": "x"},
    }


def test_outline_names_server_tools_by_name() -> None:
    tools = [*TOOLS, {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]
    outline = CLAUDE.outline(outline_request(tools=tools))
    assert list(outline.tools) == ["get_weather", "get_time", "web_search"]


def test_outline_changed_system_prompt_is_message_0() -> None:
    recorded = CLAUDE.outline(outline_request())
    replayed = CLAUDE.outline(outline_request(system="You are a pirate."))
    changed = [
        (position, a.role)
        for position, (a, b) in enumerate(zip(recorded.messages, replayed.messages, strict=True))
        if a != b
    ]
    assert changed == [(0, "system")]


def test_outline_reports_argument_drift_as_a_path() -> None:
    drifted = outline_request()
    drifted["messages"][1]["content"][1]["input"]["city"] = "Paris"
    recorded = CLAUDE.outline(outline_request()).messages[2]
    replayed = CLAUDE.outline(drifted).messages[2]
    assert replayed.tool_calls == (("get_weather", '{"city":"Paris","unit":"c"}'),)
    lines = divergence._argument_drift(recorded, replayed)
    assert lines is not None
    assert len(lines) == 1
    assert lines[0].startswith("get_weather.city")
    assert "Nairobi" in lines[0]
    assert "Paris" in lines[0]


# --- render: plain ------------------------------------------------------------------------


def test_render_non_stream_is_the_json() -> None:
    resp = response([{"type": "text", "text": "Héllo"}])
    rendered = CLAUDE.render({"model": "m"}, 200, resp, stream=False)
    assert rendered.status == 200
    assert rendered.content_type == "application/json"
    assert rendered.body == json.dumps(resp, ensure_ascii=False).encode()


def test_render_error_status_is_json_even_when_streaming() -> None:
    error = CLAUDE.error_body("slow down", "rate_limit_error", 429)
    rendered = CLAUDE.render({"stream": True}, 429, error, stream=True)
    assert (rendered.status, rendered.content_type) == (429, "application/json")
    assert json.loads(rendered.body) == error


def test_error_body_shape() -> None:
    assert CLAUDE.error_body("no turn left", "invalid_request_error", 400) == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "no turn left"},
    }


# --- render: stream -----------------------------------------------------------------------


def sse_events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) for each SSE event; each must be exactly `event:` then `data:`."""
    text = body.decode()
    assert text.endswith("\n\n")
    events = []
    for raw in text[:-2].split("\n\n"):
        lines = raw.split("\n")
        assert len(lines) == 2, raw
        assert lines[0].startswith("event: "), raw
        assert lines[1].startswith("data: "), raw
        name, data = lines[0][len("event: ") :], json.loads(lines[1][len("data: ") :])
        assert data["type"] == name
        events.append((name, data))
    return events


STREAM_RESPONSE = response(
    [
        {"type": "thinking", "thinking": THINKING, "signature": "EqQBCkYIBRgCKkBsig=="},
        {"type": "text", "text": LONG_TEXT},
        tool_use("toolu_w", "get_weather", WEATHER_INPUT),
        tool_use("toolu_t", "get_time", {}),
    ],
    "tool_use",
)


def test_stream_event_sequence() -> None:
    rendered = CLAUDE.render({"model": "m", "stream": True}, 200, STREAM_RESPONSE, stream=True)
    assert (rendered.status, rendered.content_type) == (200, "text/event-stream")
    events = sse_events(rendered.body)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names.count("ping") == 1
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == 4
    assert names.count("content_block_stop") == 4
    # Blocks open and close in order, deltas only inside their block.
    open_index = None
    for name, data in events:
        if name == "content_block_start":
            assert open_index is None
            open_index = data["index"]
        elif name == "content_block_delta":
            assert data["index"] == open_index
        elif name == "content_block_stop":
            assert data["index"] == open_index
            open_index = None
    assert [d["index"] for n, d in events if n == "content_block_start"] == [0, 1, 2, 3]

    start = events[0][1]["message"]
    assert start["id"] == "msg_01ABC"
    assert start["content"] == []
    assert start["stop_reason"] is None
    assert start["stop_sequence"] is None
    assert start["usage"]["input_tokens"] == 42
    assert start["usage"]["output_tokens"] == 1

    block_starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert block_starts == [
        {"type": "thinking", "thinking": ""},
        {"type": "text", "text": ""},
        {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {}},
        {"type": "tool_use", "id": "toolu_t", "name": "get_time", "input": {}},
    ]
    message_delta = events[-2][1]
    assert message_delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert message_delta["usage"]["output_tokens"] == 31


def deltas_of(events: list[tuple[str, dict[str, Any]]], index: int) -> list[dict[str, Any]]:
    return [d["delta"] for n, d in events if n == "content_block_delta" and d["index"] == index]


def test_stream_splits_every_block_into_several_deltas() -> None:
    events = sse_events(CLAUDE.render({}, 200, STREAM_RESPONSE, stream=True).body)

    thinking = deltas_of(events, 0)
    assert thinking[-1] == {"type": "signature_delta", "signature": "EqQBCkYIBRgCKkBsig=="}
    thinking_fragments = [d["thinking"] for d in thinking[:-1]]
    assert {d["type"] for d in thinking[:-1]} == {"thinking_delta"}
    assert len(thinking_fragments) >= 2
    assert "".join(thinking_fragments) == THINKING

    text = deltas_of(events, 1)
    assert {d["type"] for d in text} == {"text_delta"}
    assert len(text) >= 2
    assert "".join(d["text"] for d in text) == LONG_TEXT

    weather = deltas_of(events, 2)
    assert {d["type"] for d in weather} == {"input_json_delta"}
    assert len(weather) >= 2
    joined = "".join(d["partial_json"] for d in weather)
    assert json.loads(joined) == WEATHER_INPUT
    assert joined == json.dumps(WEATHER_INPUT, separators=(",", ":"))

    assert "".join(d["partial_json"] for d in deltas_of(events, 3)) == "{}"


def test_stream_thinking_without_signature_has_no_signature_delta() -> None:
    resp = response([{"type": "thinking", "thinking": "short thought"}])
    events = sse_events(CLAUDE.render({}, 200, resp, stream=True).body)
    assert {d["type"] for d in deltas_of(events, 0)} == {"thinking_delta"}


def test_stream_sends_whole_blocks_it_cannot_split() -> None:
    redacted = {"type": "redacted_thinking", "data": "opaque=="}
    events = sse_events(CLAUDE.render({}, 200, response([redacted]), stream=True).body)
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert starts == [redacted]
    assert deltas_of(events, 0) == []


def test_stream_without_content_still_pings_and_stops() -> None:
    events = sse_events(CLAUDE.render({}, 200, response([]), stream=True).body)
    assert [n for n, _ in events] == ["message_start", "ping", "message_delta", "message_stop"]


def test_stream_is_deterministic() -> None:
    request = {"model": "claude-flowproof-test", "stream": True}
    first = CLAUDE.render(request, 200, copy.deepcopy(STREAM_RESPONSE), stream=True)
    second = CLAUDE.render(copy.deepcopy(request), 200, copy.deepcopy(STREAM_RESPONSE), stream=True)
    assert first.body == second.body
    assert first == second
    other = copy.deepcopy(STREAM_RESPONSE)
    other["content"][1]["text"] = LONG_TEXT + "!"
    assert CLAUDE.render(request, 200, other, stream=True).body != first.body


# --- the real anthropic SDK reads what we render ------------------------------------------


def sdk_client(rendered_body: bytes, content_type: str, seen: list[httpx.Request]) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=rendered_body, headers={"content-type": content_type})

    return anthropic.Anthropic(
        base_url="http://flowproof.test",
        api_key="x",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def without_nones(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nones(v) for v in value]
    return value


REQUEST_KW: dict[str, Any] = {
    "model": "claude-flowproof-test",
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "weather in Nairobi?"}],
}


@pytest.mark.parametrize(
    "recorded",
    [
        STREAM_RESPONSE,
        response([{"type": "text", "text": "ok"}]),
        response([{"type": "text", "text": LONG_TEXT}, {"type": "text", "text": " more"}]),
        response([tool_use("toolu_1", "get_time", {"tz": "Africa/Nairobi"})], "tool_use"),
    ],
    ids=["thinking-text-tools", "short-text", "two-texts", "tool-only"],
)
def test_sdk_stream_final_message_equals_the_recording(recorded: dict[str, Any]) -> None:
    rendered = CLAUDE.render({**REQUEST_KW, "stream": True}, 200, recorded, stream=True)
    seen: list[httpx.Request] = []
    client = sdk_client(rendered.body, rendered.content_type, seen)
    with client.messages.stream(**REQUEST_KW) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()

    assert seen[0].url.path == "/v1/messages"
    assert text == "".join(b["text"] for b in recorded["content"] if b["type"] == "text")
    dumped = without_nones(final.model_dump(mode="json"))
    assert dumped["content"] == without_nones(recorded["content"])
    assert dumped == without_nones(recorded)
    assert final.stop_reason == recorded["stop_reason"]
    assert final.usage.output_tokens == 31
    assert final.usage.cache_read_input_tokens == 7


def test_sdk_stream_tool_inputs_are_dicts() -> None:
    rendered = CLAUDE.render({}, 200, STREAM_RESPONSE, stream=True)
    client = sdk_client(rendered.body, rendered.content_type, [])
    with client.messages.stream(**REQUEST_KW) as stream:
        final = stream.get_final_message()
    uses = [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"]
    assert uses == [("toolu_w", "get_weather", WEATHER_INPUT), ("toolu_t", "get_time", {})]
    thinking = final.content[0]
    assert thinking.type == "thinking"
    assert (thinking.thinking, thinking.signature) == (THINKING, "EqQBCkYIBRgCKkBsig==")


def test_sdk_create_reads_the_json_render() -> None:
    rendered = CLAUDE.render(REQUEST_KW, 200, STREAM_RESPONSE, stream=False)
    client = sdk_client(rendered.body, rendered.content_type, [])
    message = client.messages.create(stream=False, **REQUEST_KW)
    assert without_nones(message.model_dump(mode="json")) == without_nones(STREAM_RESPONSE)
    assert message.content[2].type == "tool_use"
    assert message.content[2].input == WEATHER_INPUT


def test_sdk_create_stream_true_parses_every_event() -> None:
    rendered = CLAUDE.render({}, 200, STREAM_RESPONSE, stream=True)
    client = sdk_client(rendered.body, rendered.content_type, [])
    parsed = [
        without_nones(event.model_dump(mode="json"))
        for event in client.messages.create(stream=True, **REQUEST_KW)
    ]
    # The SDK drops pings; every other event comes through whole and in order.
    expected = [without_nones(data) for name, data in sse_events(rendered.body) if name != "ping"]
    assert parsed == expected
    assert (parsed[0]["type"], parsed[-1]["type"]) == ("message_start", "message_stop")


# --- upstream -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "query", "expected"),
    [
        ("https://api.anthropic.com", "", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/", "", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/v1", "", "https://api.anthropic.com/v1/messages"),
        ("http://127.0.0.1:5/v1/", "", "http://127.0.0.1:5/v1/messages"),
        ("http://127.0.0.1:5/proxy", "beta=true", "http://127.0.0.1:5/proxy/v1/messages?beta=true"),
    ],
)
def test_upstream_url(base: str, query: str, expected: str) -> None:
    assert CLAUDE.upstream_url(base, query) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [("sk-ant-1", "sk-ant-1"), ("Bearer sk-ant-2", "sk-ant-2"), ("bearer sk-ant-3", "sk-ant-3")],
)
def test_upstream_auth_is_x_api_key(key: str, expected: str) -> None:
    assert CLAUDE.upstream_auth(key) == {"x-api-key": expected}


def test_upstream_body_is_never_streaming() -> None:
    body = {"model": "m", "stream": True, "max_tokens": 5}
    assert CLAUDE.upstream_body(body) == {"model": "m", "max_tokens": 5}
