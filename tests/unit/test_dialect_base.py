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
from flowproof_cli.dialects.sse import data_event, named_event

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
