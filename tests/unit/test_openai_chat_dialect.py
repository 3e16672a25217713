"""The OpenAI Chat Completions dialect: canonical form, mocks, trajectory, rendering."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from flowproof_cli.dialects.openai_chat import OpenAIChat
from flowproof_cli.trajectory import AssistantTurn, ToolCall

CHAT = OpenAIChat()

LONG_TEXT = (
    "The weather in Nairobi is sunny with a light breeze, 24 degrees Celsius, "
    "and no rain is expected before the evening."
)
WEATHER_ARGS = json.dumps({"city": "Nairobi", "unit": "celsius", "detail": "hourly forecast"})
TIME_ARGS = '{"timezone": "Africa/Nairobi"}'

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]


def assistant_calls(*calls: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in calls
        ],
    }


def tool_result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def response(
    *, content: str | None = None, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_abc",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def call(call_id: str, name: str, args: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


# --- canonical_request --------------------------------------------------------------------


def test_canonical_request_drops_only_transport_fields() -> None:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "tools": TOOLS,
        "max_tokens": 100,
    }
    original = copy.deepcopy(body)
    assert CHAT.canonical_request(body) == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "tools": TOOLS,
        "max_tokens": 100,
    }
    assert body == original


def test_canonical_request_keeps_a_body_without_transport_fields_whole() -> None:
    body = {"model": "m", "messages": [], "n": 1, "stop": ["x"]}
    assert CHAT.canonical_request(body) == body


def test_wants_stream() -> None:
    assert CHAT.wants_stream({"stream": True}) is True
    assert CHAT.wants_stream({"stream": False}) is False
    assert CHAT.wants_stream({}) is False


# --- apply_mocks --------------------------------------------------------------------------


def mocked_conversation() -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "weather?"},
            assistant_calls(
                ("call_1", "get_weather", '{"city":"Nairobi"}'),
                ("call_2", "get_time", "{}"),
                ("call_3", "get_weather", '{"city":"Paris"}'),
            ),
            tool_result("call_1", "real weather 1"),
            tool_result("call_2", "real time"),
            tool_result("call_3", "real weather 3"),
            assistant_calls(("call_4", "get_weather", '{"city":"Lima"}')),
            tool_result("call_4", "real weather 4"),
            tool_result("call_unknown", "orphan result"),
            {"role": "user", "content": "thanks"},
        ],
    }


def test_apply_mocks_replaces_every_result_of_a_mocked_tool() -> None:
    body = mocked_conversation()
    original = copy.deepcopy(body)
    mocked = CHAT.apply_mocks(body, {"get_weather": '{"temp":21}'}, {})

    contents = [(m["role"], m.get("tool_call_id"), m["content"]) for m in mocked["messages"]]
    assert contents == [
        ("system", None, "You are helpful."),
        ("user", None, "weather?"),
        ("assistant", None, None),
        ("tool", "call_1", '{"temp":21}'),
        ("tool", "call_2", "real time"),
        ("tool", "call_3", '{"temp":21}'),
        ("assistant", None, None),
        ("tool", "call_4", '{"temp":21}'),
        ("tool", "call_unknown", "orphan result"),
        ("user", None, "thanks"),
    ]
    # Everything but the mocked contents is as sent.
    assert mocked["model"] == "gpt-4o-mini"
    assert mocked["temperature"] == 0
    assert mocked["messages"][2] == original["messages"][2]
    # The input is not mutated.
    assert body == original


def test_apply_mocks_with_several_mocked_tools() -> None:
    mocked = CHAT.apply_mocks(
        mocked_conversation(), {"get_weather": '"w"', "get_time": '"12:00"'}, {}
    )
    tool_contents = {
        m["tool_call_id"]: m["content"] for m in mocked["messages"] if m["role"] == "tool"
    }
    assert tool_contents == {
        "call_1": '"w"',
        "call_2": '"12:00"',
        "call_3": '"w"',
        "call_4": '"w"',
        "call_unknown": "orphan result",
    }


def test_apply_mocks_leaves_non_mocked_tools_alone() -> None:
    body = mocked_conversation()
    assert CHAT.apply_mocks(body, {"search": '"x"'}, {}) == mocked_conversation()
    assert CHAT.apply_mocks(body, {}, {}) == mocked_conversation()


def test_apply_mocks_without_messages_is_identity() -> None:
    assert CHAT.apply_mocks({"model": "m"}, {"get_weather": "1"}, {}) == {"model": "m"}


def test_apply_mocks_uses_known_calls_from_earlier_responses() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            tool_result("call_old", "real"),
            tool_result("call_other", "kept"),
        ],
    }
    known = {"call_old": "get_weather", "call_other": "get_time"}
    mocked = CHAT.apply_mocks(body, {"get_weather": '"mocked"'}, known)
    assert [m["content"] for m in mocked["messages"]] == ["go", '"mocked"', "kept"]
    assert known == {"call_old": "get_weather", "call_other": "get_time"}


def test_call_names_of_a_response() -> None:
    resp = response(
        tool_calls=[call("call_a", "get_weather", "{}"), call("call_b", "get_time", "{}")]
    )
    assert CHAT.call_names(resp) == {"call_a": "get_weather", "call_b": "get_time"}
    assert CHAT.call_names(response(content="hi")) == {}


# --- assistant_turn -----------------------------------------------------------------------


def test_assistant_turn_extracts_calls_text_and_thread_key() -> None:
    request = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "weather?"},
        ],
    }
    resp = response(
        content="Checking.",
        tool_calls=[
            call("call_a", "get_weather", '{"city":"Nairobi"}'),
            call("call_b", "get_time", ""),
        ],
    )
    turn = CHAT.assistant_turn(request, resp, 3)
    assert turn == AssistantTurn(
        turn=3,
        text="Checking.",
        tool_calls=(
            ToolCall("get_weather", '{"city":"Nairobi"}', 3, "call_a"),
            ToolCall("get_time", "", 3, "call_b"),
        ),
        thread_key="You are a weather bot.\nBe brief.",
        request_size=len(json.dumps(request["messages"])),
    )


def test_assistant_turn_without_content_has_no_text() -> None:
    turn = CHAT.assistant_turn(
        {"messages": [{"role": "user", "content": "x"}]},
        response(tool_calls=[call("c", "get_time", "{}")]),
        1,
    )
    assert turn.text is None
    assert turn.thread_key == ""
    assert [c.name for c in turn.tool_calls] == ["get_time"]


def test_assistant_turn_of_a_response_without_choices() -> None:
    turn = CHAT.assistant_turn({"messages": []}, {"choices": []}, 2)
    assert turn == AssistantTurn(turn=2, text=None, tool_calls=(), request_size=2)


# --- render: plain ------------------------------------------------------------------------


def test_render_non_stream_is_the_json() -> None:
    resp = response(content="Héllo")
    rendered = CHAT.render({"model": "m"}, 200, resp, stream=False)
    assert rendered.status == 200
    assert rendered.content_type == "application/json"
    assert json.loads(rendered.body) == resp
    assert rendered.body == json.dumps(resp, ensure_ascii=False).encode()


def test_render_error_status_is_json_even_when_streaming() -> None:
    error = {"error": {"message": "rate limited", "type": "rate_limit"}}
    rendered = CHAT.render({"stream": True}, 429, error, stream=True)
    assert (rendered.status, rendered.content_type) == (429, "application/json")
    assert json.loads(rendered.body) == error


# --- render: stream -----------------------------------------------------------------------


def sse_payloads(body: bytes) -> list[str]:
    """The `data:` payloads of an SSE body, in order (every event must be one data line)."""
    text = body.decode()
    assert text.endswith("\n\n")
    payloads = []
    for event in text[:-2].split("\n\n"):
        assert event.startswith("data: "), event
        assert "\n" not in event
        payloads.append(event[len("data: ") :])
    return payloads


def chunks_of(body: bytes) -> list[dict[str, Any]]:
    payloads = sse_payloads(body)
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


def accumulate(body: bytes) -> ChatCompletion:
    """Reassemble a stream the way the openai SDK does."""
    state = ChatCompletionStreamState()
    for chunk in chunks_of(body):
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    return state.get_final_completion()


STREAM_RESPONSE = response(
    content=LONG_TEXT,
    tool_calls=[
        call("call_w", "get_weather", WEATHER_ARGS),
        call("call_t", "get_time", TIME_ARGS),
    ],
)


def test_stream_reassembles_content_and_tool_arguments_exactly() -> None:
    request = {"model": "gpt-4o-mini", "stream": True, "messages": []}
    rendered = CHAT.render(request, 200, STREAM_RESPONSE, stream=True)
    assert (rendered.status, rendered.content_type) == (200, "text/event-stream")

    completion = accumulate(rendered.body)
    assert completion.id == "chatcmpl-123"
    assert completion.model == "gpt-4o-mini"
    assert completion.created == 1700000000
    assert completion.system_fingerprint == "fp_abc"
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.role == "assistant"
    assert choice.message.content == LONG_TEXT
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_w", "get_weather", WEATHER_ARGS),
        ("call_t", "get_time", TIME_ARGS),
    ]


def test_stream_splits_text_and_sends_each_call_whole() -> None:
    rendered = CHAT.render({"stream": True}, 200, STREAM_RESPONSE, stream=True)
    chunks = chunks_of(rendered.body)
    content_fragments = [
        c["choices"][0]["delta"]["content"]
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("content")
    ]
    assert len(content_fragments) >= 2
    assert "".join(content_fragments) == LONG_TEXT

    arguments: dict[int, list[str]] = {}
    for c in chunks:
        for tool_call in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
            fragment = tool_call["function"].get("arguments")
            if fragment:
                arguments.setdefault(tool_call["index"], []).append(fragment)
    # One delta a call, with its id and name: what every compatible client reads (mistralai
    # refuses argument fragments without the name).
    assert arguments == {0: [WEATHER_ARGS], 1: [TIME_ARGS]}
    calls = [
        tool_call
        for c in chunks
        if c["choices"]
        for tool_call in c["choices"][0]["delta"].get("tool_calls") or []
    ]
    assert all(call["id"] and call["function"]["name"] for call in calls)
    # Every chunk carries the envelope of a chat.completion.chunk.
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["id"] for c in chunks} == {"chatcmpl-123"}


def test_stream_ends_with_done() -> None:
    body = CHAT.render({"stream": True}, 200, response(content="hi there"), stream=True).body
    assert body.endswith(b"data: [DONE]\n\n")
    assert body.count(b"[DONE]") == 1


def test_stream_text_only_reassembles() -> None:
    rendered = CHAT.render({"stream": True}, 200, response(content="ok"), stream=True)
    completion = accumulate(rendered.body)
    assert completion.choices[0].message.content == "ok"
    assert completion.choices[0].message.tool_calls is None
    assert completion.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("stream_options", "expect_usage"),
    [
        ({"include_usage": True}, True),
        ({"include_usage": False}, False),
        (None, False),
    ],
)
def test_usage_chunk_only_when_asked(stream_options: Any, expect_usage: bool) -> None:
    request: dict[str, Any] = {"model": "gpt-4o-mini", "stream": True}
    if stream_options is not None:
        request["stream_options"] = stream_options
    body = CHAT.render(request, 200, STREAM_RESPONSE, stream=True).body
    chunks = chunks_of(body)
    usage_chunks = [c for c in chunks if "usage" in c]
    if expect_usage:
        assert usage_chunks == [chunks[-1]]
        assert chunks[-1]["choices"] == []
        assert chunks[-1]["usage"] == {
            "prompt_tokens": 11,
            "completion_tokens": 7,
            "total_tokens": 18,
        }
        completion = accumulate(body)
        assert completion.usage is not None
        assert completion.usage.total_tokens == 18
    else:
        assert usage_chunks == []
        assert accumulate(body).usage is None


def test_stream_is_deterministic() -> None:
    request = {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True}}
    first = CHAT.render(request, 200, copy.deepcopy(STREAM_RESPONSE), stream=True)
    second = CHAT.render(copy.deepcopy(request), 200, copy.deepcopy(STREAM_RESPONSE), stream=True)
    assert first.body == second.body
    assert first == second
