"""What every dialect shares through `dialects/base.py`: mocks applied over the two per-dialect
hooks, the outline's parameters, one reading of content text, and the JSON spellings the
synthesized streams use (`canonical.compact_json`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowproof_cli.canonical import canonical_json, compact_json
from flowproof_cli.dialects import dialect_named
from flowproof_cli.dialects.base import text_of
from flowproof_cli.dialects.sse import (
    DELTA_SIZE,
    LARGE_ANSWER_DELTAS,
    MAX_DELTAS_PER_TURN,
    data_event,
    named_event,
    piece_size,
    split_deltas,
)

MOCK = canonical_json({"temp": 30})


def chat(result_id: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    return {
        "model": "m",
        "messages": [
            "not an entry",
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": result_id, "content": "real"},
        ],
    }


def responses(result_id: str) -> dict[str, Any]:
    return {
        "model": "m",
        "input": [
            "not an entry",
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": result_id, "output": "real"},
        ],
    }


def anthropic(result_id: str) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {}}
    result = {"type": "tool_result", "tool_use_id": result_id, "content": "real"}
    return {
        "model": "m",
        "messages": [
            "not an entry",
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ],
    }


def gemini(result_id: str) -> dict[str, Any]:
    call = {"functionCall": {"id": "c1", "name": "get_weather", "args": {}}}
    result = {"functionResponse": {"id": result_id, "response": {"output": "real"}}}
    return {
        "model": "m",
        "contents": ["not an entry", {"role": "model", "parts": [call]}, {"parts": [result]}],
    }


def result_of(protocol: str, body: dict[str, Any]) -> Any:
    """The content of the body's one tool result, in the dialect's own place."""
    last = body[dialect_named(protocol).conversation_key][-1]
    if protocol == "openai-chat":
        return last["content"]
    if protocol == "openai-responses":
        return last["output"]
    if protocol == "anthropic":
        return last["content"][0]["content"]
    return last["parts"][0]["functionResponse"]["response"]


BODIES = {"openai-chat": chat, "openai-responses": responses, "anthropic": anthropic}
BODIES["gemini"] = gemini
MOCKED = {"openai-chat": MOCK, "openai-responses": MOCK, "anthropic": MOCK}
MOCKED["gemini"] = {"temp": 30}  # Gemini's `response` is the mock's object itself


@pytest.mark.parametrize("protocol", sorted(BODIES))
def test_a_result_of_a_mocked_call_is_rewritten_and_other_entries_kept(protocol: str) -> None:
    body = BODIES[protocol]("c1")
    before = json.dumps(body)
    mocked = dialect_named(protocol).apply_mocks(body, {"get_weather": MOCK}, {})
    assert result_of(protocol, mocked) == MOCKED[protocol]
    entries = mocked[dialect_named(protocol).conversation_key]
    assert entries[:2] == body[dialect_named(protocol).conversation_key][:2]
    assert json.dumps(body) == before  # the input is not modified


@pytest.mark.parametrize("protocol", sorted(BODIES))
def test_a_result_of_an_unknown_call_or_an_unmocked_tool_is_left_alone(protocol: str) -> None:
    dialect = dialect_named(protocol)
    unknown = BODIES[protocol]("c9")
    assert dialect.apply_mocks(unknown, {"get_weather": MOCK}, {}) == unknown
    known = BODIES[protocol]("c1")
    assert dialect.apply_mocks(known, {"get_time": MOCK}, {}) == known
    assert dialect.apply_mocks(known, {}, {}) is known


@pytest.mark.parametrize("protocol", sorted(BODIES))
def test_a_call_made_in_an_earlier_response_is_found_through_known_calls(protocol: str) -> None:
    body = BODIES[protocol]("c7")
    mocked = dialect_named(protocol).apply_mocks(body, {"get_weather": MOCK}, {"c7": "get_weather"})
    assert result_of(protocol, mocked) == MOCKED[protocol]


@pytest.mark.parametrize(
    ("protocol", "system"),
    [
        ("openai-responses", {"instructions": "be brief"}),
        ("anthropic", {"system": "be brief"}),
        ("gemini", {"systemInstruction": {"parts": [{"text": "be brief"}]}}),
        ("gemini", {"system_instruction": {"parts": [{"text": "be brief"}]}}),
    ],
)
def test_the_system_field_is_the_first_entry_and_never_a_parameter(
    protocol: str, system: dict[str, Any]
) -> None:
    outline = dialect_named(protocol).outline({**BODIES[protocol]("c1"), **system, "top_k": 3})
    assert outline.parameters == {"top_k": 3}
    assert outline.messages[0].role == "system"
    assert outline.model == "m"
    assert list(outline.tools) == []


def test_text_of_joins_string_text_parts_and_shows_other_values_as_json() -> None:
    parts = [{"type": "text", "text": "a"}, {"text": 5}, "loose", {"type": "text", "text": "b"}]
    assert text_of(parts) == "ab"
    assert text_of(parts, "\n") == "a\nb"
    assert text_of("plain") == "plain"
    assert text_of(None) == ""
    assert text_of({"b": 1, "a": "é"}) == '{"a": "\\u00e9", "b": 1}'


def test_compact_json_keeps_the_wire_order_where_canonical_json_sorts() -> None:
    payload = {"type": "ping", "index": 0, "text": "é"}
    assert compact_json(payload) == '{"type":"ping","index":0,"text":"é"}'
    assert canonical_json(payload) == '{"index":0,"text":"é","type":"ping"}'
    assert compact_json(payload) != canonical_json(payload)
    assert data_event(payload) == f"data: {compact_json(payload)}\n\n"
    assert named_event("ping", payload) == f"event: ping\ndata: {compact_json(payload)}\n\n"


# -- a long answer streams in a bounded number of events ---------------------------------------

LONG = ("The quick brown fox jumps over the lazy dog. " * 50_000)[:2_000_000]  # 2 MB
LONG_ARGS = compact_json({"notes": "n" * 300_000})


def answer(protocol: str, text: str, arguments: str) -> dict[str, Any]:
    """A recorded answer with `text` and one tool call with `arguments`, per dialect."""
    if protocol == "openai-chat":
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
        message = {"role": "assistant", "content": text, "tool_calls": [call]}
        return {"id": "x", "model": "m", "choices": [{"index": 0, "message": message}]}
    if protocol == "openai-responses":
        part = {"type": "output_text", "text": text, "annotations": []}
        message = {"type": "message", "id": "m1", "role": "assistant", "content": [part]}
        call = {"type": "function_call", "id": "f1", "call_id": "c1", "name": "f"}
        return {"id": "r", "output": [message, {**call, "arguments": arguments}]}
    if protocol == "anthropic":
        use = {"type": "tool_use", "id": "t1", "name": "f", "input": json.loads(arguments)}
        content = [{"type": "text", "text": text}, use]
        return {"id": "a", "type": "message", "role": "assistant", "content": content}
    call = {"functionCall": {"name": "f", "args": json.loads(arguments)}}
    content = {"role": "model", "parts": [{"text": text}, call]}
    return {"candidates": [{"content": content, "finishReason": "STOP"}], "modelVersion": "g"}


def streamed(protocol: str, response: dict[str, Any]) -> tuple[list[Any], str, str]:
    """The events of the synthesized stream, and the text and arguments they carry joined."""
    payloads = [
        json.loads(line[6:])
        for event in dialect_named(protocol).stream_events({"model": "m"}, response).split("\n\n")
        for line in event.split("\n")
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    text, arguments = [], []
    for payload in payloads:
        if protocol == "openai-chat":
            delta = payload["choices"][0]["delta"] if payload["choices"] else {}
            text.append(delta.get("content") or "")
            arguments += [c["function"]["arguments"] for c in delta.get("tool_calls") or []]
        elif protocol == "openai-responses":
            kind = payload["type"]
            text.append(payload["delta"] if kind == "response.output_text.delta" else "")
            arguments.append(
                payload["delta"] if kind == "response.function_call_arguments.delta" else ""
            )
        elif protocol == "anthropic":
            delta = payload.get("delta") or {}
            text.append(delta.get("text", "") if payload["type"] == "content_block_delta" else "")
            arguments.append(delta.get("partial_json", ""))
        else:
            for part in payload["candidates"][0]["content"]["parts"]:
                text.append(part.get("text", ""))
                if "functionCall" in part:
                    arguments.append(compact_json(part["functionCall"]["args"]))
    return payloads, "".join(text), "".join(arguments)


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_a_2_mb_answer_streams_in_a_bounded_number_of_events(protocol: str) -> None:
    """A replayed 2 MB answer took 83,000 events of 24 characters (9 s to a streaming
    openai client against 1 s plain); a long answer's text now goes in
    LARGE_ANSWER_DELTAS pieces (one more per split field at most), carried whole."""
    events, text, arguments = streamed(protocol, answer(protocol, LONG, LONG_ARGS))
    assert len(events) <= LARGE_ANSWER_DELTAS + 2 + 12, len(events)
    assert (text, arguments) == (LONG, LONG_ARGS)


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_a_small_answer_still_streams_in_24_character_pieces(protocol: str) -> None:
    """Up to MAX_DELTAS_PER_TURN pieces of DELTA_SIZE, the stream is what it always was."""
    limit = DELTA_SIZE * MAX_DELTAS_PER_TURN
    small = "x" * (limit - len(compact_json({"q": ""})) - 200)
    events, text, _ = streamed(protocol, answer(protocol, small, compact_json({"q": ""})))
    pieces = [p for p in events if json.dumps(p).count("x" * DELTA_SIZE) == 1]
    assert len(pieces) == len(small) // DELTA_SIZE and text == small


def test_piece_size_grows_only_past_the_bound() -> None:
    limit = DELTA_SIZE * MAX_DELTAS_PER_TURN
    assert piece_size({"a": "x" * limit}) == DELTA_SIZE
    assert piece_size({"a": "x" * (limit + 1)}) == -(-(limit + 1) // LARGE_ANSWER_DELTAS)
    assert piece_size({"a": ["x" * limit, {"b": "x" * limit}]}) == limit // 8
    assert piece_size({"a": 1, "b": None}) == DELTA_SIZE
    assert split_deltas("y" * 100, 24) == ["y" * 24] * 4 + ["y" * 4]


@pytest.mark.parametrize(
    ("protocol", "request_", "field"),
    [
        ("openai-chat", {"model": "m", "messages": 1e30}, "messages"),
        ("openai-chat", {"model": "m", "messages": [], "tools": 7}, "tools"),
        ("anthropic", {"model": "m", "messages": 3}, "messages"),
        ("gemini", {"contents": 5}, "contents"),
    ],
)
def test_the_field_a_dialect_cannot_read_is_named(
    protocol: str, request_: dict[str, Any], field: str
) -> None:
    found = dialect_named(protocol).unreadable_field(request_)
    assert found is not None
    assert found[0] == field
    assert isinstance(found[1], TypeError)


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_a_request_a_dialect_reads_has_no_unreadable_field(protocol: str) -> None:
    conversation = dialect_named(protocol).conversation_key
    assert dialect_named(protocol).unreadable_field({"model": "m", conversation: []}) is None
