"""The OpenAI Responses dialect: canonical form, mocks, trajectory, outline, rendering.

The synthesized stream is read back by the real `openai` SDK over an httpx mock transport, so
a shape the SDK cannot accumulate fails here rather than in an agent run.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import openai
import pytest

from flowproof_cli.dialects.base import MessageOutline, Rendered
from flowproof_cli.dialects.openai_responses import OpenAIResponses
from flowproof_cli.trajectory import ToolCall

RESPONSES = OpenAIResponses()

INSTRUCTIONS = "You are a weather assistant."
LONG_TEXT = (
    "The weather in Nairobi is sunny with a light breeze, 24 degrees Celsius, "
    "and no rain is expected before the evening. Ünïcode survives too: 日本."
)
SECOND_TEXT = " Anything else?"
WEATHER_ARGS = json.dumps({"city": "Nairobi", "unit": "celsius", "detail": "hourly forecast"})
TIME_ARGS = '{"timezone": "Africa/Nairobi"}'

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    },
    {"type": "function", "name": "get_time", "parameters": {"type": "object"}, "strict": True},
    {"type": "web_search"},
]


def message_item(item_id: str, *texts: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [
            {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            for text in texts
        ],
    }


def call_item(item_id: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def output_item(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


REASONING_ITEM: dict[str, Any] = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [],
    "encrypted_content": "opaque",
}


def response(*output: dict[str, Any], response_id: str = "resp_1") -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": INSTRUCTIONS,
        "model": "gpt-4.1-mini-2025-04-14",
        "output": list(output),
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": {
            "input_tokens": 31,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 17,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 48,
        },
        "metadata": {},
    }


TEXT_RESPONSE = response(message_item("msg_1", LONG_TEXT, SECOND_TEXT))
CALLS_RESPONSE = response(
    REASONING_ITEM,
    call_item("fc_1", "call_1", "get_weather", WEATHER_ARGS),
    call_item("fc_2", "call_2", "get_time", TIME_ARGS),
    response_id="resp_2",
)
REQUEST: dict[str, Any] = {
    "model": "gpt-4.1-mini",
    "instructions": INSTRUCTIONS,
    "input": [{"role": "user", "content": "weather in Nairobi?"}],
    "tools": TOOLS,
    "stream": True,
}


# --- canonical_request --------------------------------------------------------------------


def test_canonical_request_drops_only_transport_fields() -> None:
    body = {
        "model": "gpt-4.1-mini",
        "input": "hi",
        "instructions": INSTRUCTIONS,
        "tools": TOOLS,
        "previous_response_id": "resp_0",
        "store": True,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "text"}},
        "include": ["reasoning.encrypted_content"],
        "stream": True,
        "stream_options": {"include_obfuscation": False},
    }
    original = copy.deepcopy(body)
    canonical = RESPONSES.canonical_request(body)
    expected = {k: v for k, v in original.items() if k not in ("stream", "stream_options")}
    assert canonical == expected
    assert body == original


def test_wants_stream_and_identity() -> None:
    assert RESPONSES.name == "openai-responses"
    assert RESPONSES.route_suffixes == ("responses",)
    assert RESPONSES.wants_stream({"stream": True}) is True
    assert RESPONSES.wants_stream({}) is False
    assert RESPONSES.upstream_url("https://api.openai.com/v1/", "") == (
        "https://api.openai.com/v1/responses"
    )


# --- apply_mocks --------------------------------------------------------------------------


def same_request_body() -> dict[str, Any]:
    return {
        "model": "gpt-4.1-mini",
        "instructions": INSTRUCTIONS,
        "input": [
            {"role": "user", "content": "weather?"},
            REASONING_ITEM,
            call_item("fc_1", "call_1", "get_weather", '{"city":"Nairobi"}'),
            call_item("fc_2", "call_2", "get_time", "{}"),
            output_item("call_1", "real weather 1"),
            output_item("call_2", "real time"),
            output_item("call_unknown", "orphan result"),
            {"role": "user", "content": "thanks"},
        ],
    }


def outputs_of(body: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (item["call_id"], item["output"])
        for item in body["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


def test_apply_mocks_maps_call_ids_through_function_calls_in_the_same_input() -> None:
    body = same_request_body()
    original = copy.deepcopy(body)
    mocked = RESPONSES.apply_mocks(body, {"get_weather": '{"temp":21}'}, {})
    assert outputs_of(mocked) == [
        ("call_1", '{"temp":21}'),
        ("call_2", "real time"),
        ("call_unknown", "orphan result"),
    ]
    # Everything but the mocked output is untouched, and the input body was not mutated.
    assert [item for item in mocked["input"] if item.get("call_id") != "call_1"] == [
        item for item in original["input"] if item.get("call_id") != "call_1"
    ]
    assert {k: v for k, v in mocked.items() if k != "input"} == {
        k: v for k, v in original.items() if k != "input"
    }
    assert body == original


def test_apply_mocks_maps_call_ids_through_known_calls_on_a_previous_response_chain() -> None:
    body = {
        "model": "gpt-4.1-mini",
        "previous_response_id": "resp_2",
        "input": [
            output_item("call_1", "real weather"),
            output_item("call_2", "real time"),
            output_item("call_3", "never asked for"),
        ],
    }
    original = copy.deepcopy(body)
    known = RESPONSES.call_names(CALLS_RESPONSE)
    mocked = RESPONSES.apply_mocks(body, {"get_weather": '{"temp":21}'}, known)
    assert outputs_of(mocked) == [
        ("call_1", '{"temp":21}'),
        ("call_2", "real time"),
        ("call_3", "never asked for"),
    ]
    assert mocked["previous_response_id"] == "resp_2"
    assert body == original
    # Without the harvested calls the ids are unknown, so nothing is replaced.
    assert outputs_of(RESPONSES.apply_mocks(body, {"get_weather": '{"temp":21}'}, {})) == (
        outputs_of(original)
    )


def test_apply_mocks_replaces_every_mocked_tool_and_array_outputs() -> None:
    body = same_request_body()
    body["input"][4]["output"] = [{"type": "input_text", "text": "structured"}]
    mocks = {"get_weather": '{"temp":21}', "get_time": '"noon"'}
    mocked = RESPONSES.apply_mocks(body, mocks, {})
    assert outputs_of(mocked) == [
        ("call_1", '{"temp":21}'),
        ("call_2", '"noon"'),
        ("call_unknown", "orphan result"),
    ]
    assert body["input"][4]["output"] == [{"type": "input_text", "text": "structured"}]


def test_apply_mocks_leaves_string_input_and_unmocked_bodies_alone() -> None:
    text_body = {"model": "m", "input": "hello", "previous_response_id": "resp_2"}
    assert RESPONSES.apply_mocks(text_body, {"get_weather": "{}"}, {"call_1": "get_weather"}) == {
        "model": "m",
        "input": "hello",
        "previous_response_id": "resp_2",
    }
    body = same_request_body()
    assert RESPONSES.apply_mocks(body, {}, {"call_1": "get_weather"}) == same_request_body()
    assert RESPONSES.apply_mocks(body, {"other": "{}"}, {}) == same_request_body()


# --- call_names / assistant_turn ------------------------------------------------------------


def test_call_names_use_the_call_id_not_the_item_id() -> None:
    assert RESPONSES.call_names(CALLS_RESPONSE) == {"call_1": "get_weather", "call_2": "get_time"}
    assert RESPONSES.call_names(TEXT_RESPONSE) == {}


def test_assistant_turn_with_text_only() -> None:
    turn = RESPONSES.assistant_turn(REQUEST, TEXT_RESPONSE, 3)
    assert turn.turn == 3
    assert turn.text == LONG_TEXT + SECOND_TEXT
    assert turn.tool_calls == ()
    assert turn.thread_key == INSTRUCTIONS
    expected_size = len(json.dumps(REQUEST["input"])) + len(json.dumps(INSTRUCTIONS))
    assert turn.request_size == expected_size


def test_assistant_turn_with_tool_calls_has_no_text() -> None:
    turn = RESPONSES.assistant_turn(REQUEST, CALLS_RESPONSE, 2)
    assert turn.text is None
    assert turn.tool_calls == (
        ToolCall(name="get_weather", raw_arguments=WEATHER_ARGS, turn=2, call_id="call_1"),
        ToolCall(name="get_time", raw_arguments=TIME_ARGS, turn=2, call_id="call_2"),
    )
    assert turn.tool_calls[0].arguments == json.loads(WEATHER_ARGS)


def test_assistant_turn_with_text_and_a_call_skips_refusals_and_reasoning() -> None:
    message = message_item("msg_1", "Checking.")
    message["content"].append({"type": "refusal", "refusal": "not this"})
    mixed = response(REASONING_ITEM, message, call_item("fc_9", "call_9", "get_time", "{}"))
    turn = RESPONSES.assistant_turn(REQUEST, mixed, 1)
    assert turn.text == "Checking."
    assert [(c.name, c.call_id) for c in turn.tool_calls] == [("get_time", "call_9")]


def test_thread_key_falls_back_to_system_and_developer_items() -> None:
    request = {
        "model": "m",
        "input": [
            {"role": "system", "content": "Be brief."},
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "X"}],
            },
            {"role": "user", "content": "hi"},
        ],
    }
    turn = RESPONSES.assistant_turn(request, TEXT_RESPONSE, 1)
    assert turn.thread_key == "Be brief.\nX"
    assert turn.request_size == len(json.dumps(request["input"]))
    assert RESPONSES.assistant_turn({"input": "hi"}, TEXT_RESPONSE, 1).thread_key == ""


# --- outline ------------------------------------------------------------------------------


def test_outline_puts_instructions_first_and_calls_as_tool_calls() -> None:
    request = {**same_request_body(), "tools": TOOLS, "store": False, "tool_choice": "auto"}
    outline = RESPONSES.outline(request)
    assert outline.model == "gpt-4.1-mini"
    assert list(outline.tools) == ["get_weather", "get_time", "web_search"]
    assert outline.tools["get_weather"] == TOOLS[0]
    assert outline.tools["web_search"] == {"type": "web_search"}
    assert outline.messages == (
        MessageOutline(role="system", content=INSTRUCTIONS),
        MessageOutline(role="user", content="weather?"),
        MessageOutline(
            role="reasoning",
            content={"id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        ),
        MessageOutline(
            role="assistant", content=None, tool_calls=(("get_weather", '{"city":"Nairobi"}'),)
        ),
        MessageOutline(role="assistant", content=None, tool_calls=(("get_time", "{}"),)),
        MessageOutline(role="tool", content="real weather 1"),
        MessageOutline(role="tool", content="real time"),
        MessageOutline(role="tool", content="orphan result"),
        MessageOutline(role="user", content="thanks"),
    )
    assert outline.parameters == {"store": False, "tool_choice": "auto"}


def test_outline_of_a_string_input_without_instructions() -> None:
    outline = RESPONSES.outline({"model": "m", "input": "hello", "previous_response_id": "r"})
    assert outline.messages == (MessageOutline(role="user", content="hello"),)
    assert outline.tools == {}
    assert outline.parameters == {"previous_response_id": "r"}


# --- render: JSON and errors -----------------------------------------------------------------


def test_render_non_stream_is_the_recorded_json() -> None:
    rendered = RESPONSES.render(REQUEST, 200, TEXT_RESPONSE, stream=False)
    assert rendered.status == 200
    assert rendered.content_type == "application/json"
    assert json.loads(rendered.body) == TEXT_RESPONSE


def test_render_errors_are_json_even_when_streaming() -> None:
    error = RESPONSES.error_body("no recorded turn matches", "flowproof_divergence", 409)
    assert error == {
        "error": {
            "message": "no recorded turn matches",
            "type": "flowproof_divergence",
            "code": "flowproof_divergence",
            "param": None,
        }
    }
    rendered = RESPONSES.render(REQUEST, 409, error, stream=True)
    assert (rendered.status, rendered.content_type) == (409, "application/json")
    assert json.loads(rendered.body) == error


# --- render: the synthesized stream ----------------------------------------------------------


def parse_stream(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    text = body.decode()
    assert text.endswith("\n\n")
    events = []
    for block in text[:-2].split("\n\n"):
        event_line, data_line = block.split("\n")
        assert event_line.startswith("event: ")
        assert data_line.startswith("data: ")
        events.append((event_line[len("event: ") :], json.loads(data_line[len("data: ") :])))
    return events


def test_stream_framing_sequence_numbers_and_lifecycle() -> None:
    rendered = RESPONSES.render(REQUEST, 200, CALLS_RESPONSE, stream=True)
    assert (rendered.status, rendered.content_type) == (200, "text/event-stream")
    assert b"[DONE]" not in rendered.body
    events = parse_stream(rendered.body)
    for position, (name, data) in enumerate(events):
        assert data["type"] == name
        assert data["sequence_number"] == position
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    for _, data in events[:2]:
        assert data["response"]["status"] == "in_progress"
        assert data["response"]["output"] == []
        assert data["response"]["id"] == "resp_2"
    assert names[-1] == "response.completed"
    assert events[-1][1]["response"] == CALLS_RESPONSE
    # The reasoning item is only announced and finished.
    assert [(n, d["item"]["id"]) for n, d in events if d.get("output_index") == 0] == [
        ("response.output_item.added", "rs_1"),
        ("response.output_item.done", "rs_1"),
    ]


def test_stream_of_function_calls_splits_arguments_into_several_deltas() -> None:
    events = parse_stream(RESPONSES.render(REQUEST, 200, CALLS_RESPONSE, stream=True).body)
    for index, item_id, name, args in (
        (1, "fc_1", "get_weather", WEATHER_ARGS),
        (2, "fc_2", "get_time", TIME_ARGS),
    ):
        mine = [(n, d) for n, d in events if d.get("output_index") == index]
        assert mine[0][0] == "response.output_item.added"
        assert mine[0][1]["item"] == {
            **call_item(item_id, f"call_{index}", name, ""),
            "status": "in_progress",
        }
        deltas = [d for n, d in mine if n == "response.function_call_arguments.delta"]
        assert len(deltas) >= 2
        assert all(d["item_id"] == item_id for d in deltas)
        assert "".join(d["delta"] for d in deltas) == args
        done = [d for n, d in mine if n == "response.function_call_arguments.done"]
        assert [(d["name"], d["arguments"], d["item_id"]) for d in done] == [(name, args, item_id)]
        assert mine[-1] == (
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "sequence_number": mine[-1][1]["sequence_number"],
                "output_index": index,
                "item": CALLS_RESPONSE["output"][index],
            },
        )


def test_stream_of_a_message_emits_parts_and_text_deltas() -> None:
    events = parse_stream(RESPONSES.render(REQUEST, 200, TEXT_RESPONSE, stream=True).body)
    names = [name for name, _ in events]
    added = events[names.index("response.output_item.added")][1]
    assert added["item"] == {**TEXT_RESPONSE["output"][0], "status": "in_progress", "content": []}
    for content_index, text in enumerate((LONG_TEXT, SECOND_TEXT)):
        part_events = [(n, d) for n, d in events if d.get("content_index") == content_index]
        part_names = [n for n, _ in part_events]
        assert part_names[0] == "response.content_part.added"
        assert part_events[0][1]["part"] == {
            "type": "output_text",
            "text": "",
            "annotations": [],
            "logprobs": [],
        }
        assert part_names[-2:] == ["response.output_text.done", "response.content_part.done"]
        deltas = [d for n, d in part_events if n == "response.output_text.delta"]
        assert len(deltas) >= 2
        assert len(deltas) == len(part_names) - 3
        assert all(
            (d["item_id"], d["output_index"], d["logprobs"]) == ("msg_1", 0, []) for d in deltas
        )
        assert "".join(d["delta"] for d in deltas) == text
        assert part_events[-2][1]["text"] == text
        assert part_events[-1][1]["part"] == TEXT_RESPONSE["output"][0]["content"][content_index]
    assert names[-2:] == ["response.output_item.done", "response.completed"]
    assert events[-2][1]["item"] == TEXT_RESPONSE["output"][0]


def test_stream_of_a_refusal_uses_refusal_events() -> None:
    refusing = response(
        {
            "id": "msg_r",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "refusal", "refusal": "I can't help with that request."}],
        }
    )
    events = parse_stream(RESPONSES.render(REQUEST, 200, refusing, stream=True).body)
    names = [name for name, _ in events]
    assert "response.output_text.delta" not in names
    deltas = [d["delta"] for n, d in events if n == "response.refusal.delta"]
    assert len(deltas) >= 2
    assert "".join(deltas) == "I can't help with that request."
    assert events[names.index("response.content_part.added")][1]["part"] == {
        "type": "refusal",
        "refusal": "",
    }


def test_stream_is_deterministic() -> None:
    first = RESPONSES.render(REQUEST, 200, CALLS_RESPONSE, stream=True).body
    second = RESPONSES.render(
        copy.deepcopy(REQUEST), 200, copy.deepcopy(CALLS_RESPONSE), stream=True
    ).body
    assert first == second
    other = RESPONSES.render(REQUEST, 200, TEXT_RESPONSE, stream=True).body
    assert first != other


def test_render_does_not_mutate_the_recorded_response() -> None:
    recorded = copy.deepcopy(CALLS_RESPONSE)
    RESPONSES.render(REQUEST, 200, recorded, stream=True)
    assert recorded == CALLS_RESPONSE


# --- the real openai SDK reads what we render ------------------------------------------------


def sdk_client(rendered: Rendered, seen: list[dict[str, Any]]) -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/responses"
        seen.append(json.loads(request.content))
        return httpx.Response(
            rendered.status, headers={"content-type": rendered.content_type}, content=rendered.body
        )

    return openai.OpenAI(
        base_url="http://flowproof.test/v1",
        api_key="x",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


MIXED_RESPONSE = response(
    REASONING_ITEM,
    message_item("msg_7", LONG_TEXT),
    call_item("fc_7", "call_7", "get_weather", WEATHER_ARGS),
    response_id="resp_7",
)


@pytest.mark.parametrize("recorded", [TEXT_RESPONSE, CALLS_RESPONSE, MIXED_RESPONSE])
def test_sdk_responses_stream_accumulates_text_and_arguments(recorded: dict[str, Any]) -> None:
    seen: list[dict[str, Any]] = []
    client = sdk_client(RESPONSES.render(REQUEST, 200, recorded, stream=True), seen)
    text_deltas: dict[tuple[int, int], list[str]] = {}
    text_snapshots: dict[tuple[int, int], str] = {}
    arg_deltas: dict[int, list[str]] = {}
    arg_snapshots: dict[int, str] = {}
    with client.responses.stream(
        model="gpt-4.1-mini", instructions=INSTRUCTIONS, input="weather in Nairobi?"
    ) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                key = (event.output_index, event.content_index)
                text_deltas.setdefault(key, []).append(event.delta)
                text_snapshots[key] = event.snapshot
            elif event.type == "response.function_call_arguments.delta":
                arg_deltas.setdefault(event.output_index, []).append(event.delta)
                arg_snapshots[event.output_index] = event.snapshot
        final = stream.get_final_response()
    assert seen[0]["stream"] is True

    expected_texts = {
        (index, position): part["text"]
        for index, item in enumerate(recorded["output"])
        if item["type"] == "message"
        for position, part in enumerate(item["content"])
    }
    expected_args = {
        index: item["arguments"]
        for index, item in enumerate(recorded["output"])
        if item["type"] == "function_call"
    }
    assert {key: "".join(parts) for key, parts in text_deltas.items()} == expected_texts
    assert text_snapshots == expected_texts  # the SDK's own accumulation from the deltas
    assert all(len(parts) >= 2 for parts in text_deltas.values())
    assert {key: "".join(parts) for key, parts in arg_deltas.items()} == expected_args
    assert arg_snapshots == expected_args
    assert all(len(parts) >= 2 for parts in arg_deltas.values())

    assert final.id == recorded["id"]
    assert final.status == "completed"
    assert final.usage is not None and final.usage.total_tokens == 48
    assert final.output_text == "".join(expected_texts.values())
    assert [item.type for item in final.output] == [item["type"] for item in recorded["output"]]
    calls = [
        (item.call_id, item.name, item.arguments)
        for item in final.output
        if item.type == "function_call"
    ]
    assert calls == [
        (item["call_id"], item["name"], item["arguments"])
        for item in recorded["output"]
        if item["type"] == "function_call"
    ]


def test_sdk_create_stream_true_events_accumulate_exactly() -> None:
    seen: list[dict[str, Any]] = []
    client = sdk_client(RESPONSES.render(REQUEST, 200, MIXED_RESPONSE, stream=True), seen)
    events = list(
        client.responses.create(model="gpt-4.1-mini", input="weather?", tools=[], stream=True)
    )
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"

    # Accumulate the way a hand-written client would: items from added, text and arguments
    # from deltas, and compare with the done events and the final response.
    items: dict[int, dict[str, Any]] = {}
    for event in events:
        if event.type == "response.output_item.added":
            items[event.output_index] = event.item.to_dict()
        elif event.type == "response.content_part.added":
            items[event.output_index]["content"].append(event.part.to_dict())
        elif event.type == "response.output_text.delta":
            items[event.output_index]["content"][event.content_index]["text"] += event.delta
        elif event.type == "response.function_call_arguments.delta":
            items[event.output_index]["arguments"] += event.delta
    assert items[1]["content"][0]["text"] == LONG_TEXT
    assert items[2]["arguments"] == WEATHER_ARGS
    assert items[2]["call_id"] == "call_7"
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [(e.name, e.arguments) for e in done] == [("get_weather", WEATHER_ARGS)]
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.output_text == LONG_TEXT
    assert final.response.model_dump(mode="json", exclude_unset=True) == MIXED_RESPONSE


def test_sdk_create_non_stream_reads_the_recorded_json() -> None:
    seen: list[dict[str, Any]] = []
    client = sdk_client(RESPONSES.render(REQUEST, 200, MIXED_RESPONSE, stream=False), seen)
    result = client.responses.create(model="gpt-4.1-mini", input="weather?")
    assert "stream" not in seen[0]
    assert result.id == "resp_7"
    assert result.output_text == LONG_TEXT
    call = result.output[2]
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_7", "get_weather", WEATHER_ARGS)


def test_sdk_raises_the_rendered_error_when_streaming() -> None:
    error = RESPONSES.error_body("no recorded turn matches", "flowproof_divergence", 409)
    client = sdk_client(RESPONSES.render(REQUEST, 409, error, stream=True), [])
    with pytest.raises(openai.ConflictError) as raised:
        client.responses.create(model="gpt-4.1-mini", input="hi", stream=True)
    assert raised.value.code == "flowproof_divergence"
    assert "no recorded turn matches" in raised.value.message


# --- custom (free-form) tools: Codex's apply_patch -------------------------------------------


def test_custom_tool_calls_are_in_the_trajectory_with_their_input() -> None:
    response = {
        "output": [
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch",
                "call_id": "c1",
            }
        ]
    }
    (call,) = RESPONSES.assistant_turn({}, response, 1).tool_calls
    assert (call.name, call.call_id) == ("apply_patch", "c1")
    assert json.loads(call.raw_arguments) == {"input": "*** Begin Patch"}


def test_custom_tool_results_are_mocked_like_function_results() -> None:
    body = {
        "input": [
            {"type": "custom_tool_call", "name": "apply_patch", "input": "x", "call_id": "c1"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "real output"},
            {"type": "custom_tool_call_output", "call_id": "other", "output": "left alone"},
        ]
    }
    mocked = RESPONSES.apply_mocks(body, {"apply_patch": "Done!"}, {})
    assert [item.get("output") for item in mocked["input"]] == [None, "Done!", "left alone"]
    assert body["input"][1]["output"] == "real output"  # the input is not modified
