"""Cohere v2: routing, the named-event stream (read back by the real `cohere` SDK), results
mocked by `tool_call_id`, the upstream URL for v1 and v2 paths, the error shape; and its
endpoints `/v2/embed`, `/v2/rerank` and `/v1/rerank`."""

from __future__ import annotations

import json
from typing import Any

import cohere
import httpx
import pytest

from flowproof_addons.conversation import model_response
from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.dialects import Rendered, dialect_named, route
from flowproof_cli.dialects.cohere import CohereChat
from flowproof_cli.dialects.cohere_endpoints import CohereEmbed, CohereRerank
from flowproof_cli.trajectory import ToolCall

CHAT = CohereChat()
EMBED = CohereEmbed()
RERANK = CohereRerank()
LONG_TEXT = "The weather in Nairobi is sunny with a light breeze, 24 degrees. Ünïcödé stays."
ARGS = '{"city":"Nairobi","days":2}'
CALL = {
    "id": "get_weather_k2x9",
    "type": "function",
    "function": {"name": "get_weather", "arguments": ARGS},
}
USAGE = {
    "billed_units": {"input_tokens": 12, "output_tokens": 30},
    "tokens": {"input_tokens": 512, "output_tokens": 30},
}


def answer(
    text: str | None = None, calls: list[Any] | None = None, **message: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"role": "assistant", **message}
    if text is not None:
        body["content"] = [{"type": "text", "text": text}]
    if calls:
        body["tool_calls"] = calls
    return {
        "id": "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
        "finish_reason": "TOOL_CALL" if calls else "COMPLETE",
        "message": body,
        "usage": USAGE,
    }


def client_of(rendered: Rendered) -> cohere.ClientV2:
    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(
            rendered.status, content=rendered.body, headers={"content-type": rendered.content_type}
        )

    transport = httpx.Client(transport=httpx.MockTransport(handler))
    return cohere.ClientV2(api_key="k", base_url="http://127.0.0.1:9", httpx_client=transport)


def events_of(body: bytes) -> list[tuple[str, Any]]:
    found = []
    for block in body.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            found.append((lines.get("event", ""), json.loads(lines["data"])))
    return found


# -- routing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/v2/chat", "cohere-chat"),
        ("/compatibility/v2/chat", "cohere-chat"),
        ("/v2/embed", "cohere-embed"),
        ("/v2/rerank", "cohere-rerank"),
        ("/v1/rerank", "cohere-rerank-v1"),
    ],
)
def test_v2_paths_route_to_cohere(path: str, name: str) -> None:
    dialect = route(path)
    assert dialect is not None and dialect.name == name and dialect.provider == "cohere"
    assert dialect_named(name) is dialect


# -- rendering, read back by the real SDK --------------------------------------------------


def test_plain_answer_reads_back_as_the_recorded_response() -> None:
    rendered = CHAT.render({}, 200, answer(LONG_TEXT), stream=False)
    response = client_of(rendered).chat(model="command-a-03-2025", messages=[])
    assert response.message.content[0].text == LONG_TEXT
    assert response.finish_reason == "COMPLETE"


def test_stream_is_named_events_the_sdk_joins_to_the_recorded_text() -> None:
    recorded = answer(LONG_TEXT)
    rendered = CHAT.render({"stream": True}, 200, recorded, stream=True)
    assert rendered.content_type == "text/event-stream"
    events = events_of(rendered.body)
    assert all(name == payload["type"] for name, payload in events)
    assert [name for name, _ in events][:2] == ["message-start", "content-start"]
    assert [name for name, _ in events][-2:] == ["content-end", "message-end"]
    streamed = list(client_of(rendered).chat_stream(model="command-a-03-2025", messages=[]))
    text = "".join(e.delta.message.content.text for e in streamed if e.type == "content-delta")
    assert text == LONG_TEXT
    assert len([e for e in streamed if e.type == "content-delta"]) >= 2
    end = streamed[-1]
    assert end.type == "message-end" and end.delta.finish_reason == "COMPLETE"
    assert end.delta.usage.tokens.input_tokens == 512


def test_streamed_plan_and_calls_rebuild_in_the_sdk() -> None:
    recorded = answer(None, [CALL], tool_plan="I will look up the weather in Nairobi.")
    rendered = CHAT.render({"stream": True}, 200, recorded, stream=True)
    streamed = list(client_of(rendered).chat_stream(model="m", messages=[]))
    plan = "".join(e.delta.message.tool_plan for e in streamed if e.type == "tool-plan-delta")
    assert plan == "I will look up the weather in Nairobi."
    start = next(e for e in streamed if e.type == "tool-call-start").delta.message.tool_calls
    assert (start.id, start.function.name, start.function.arguments) == (
        CALL["id"],
        "get_weather",
        "",
    )
    arguments = "".join(
        e.delta.message.tool_calls.function.arguments
        for e in streamed
        if e.type == "tool-call-delta"
    )
    assert arguments == ARGS
    assert streamed[-1].delta.finish_reason == "TOOL_CALL"


def test_a_stream_reassembles_to_the_answer_it_was_synthesized_from() -> None:
    for recorded in (
        answer(LONG_TEXT),
        answer(None, [CALL, {**CALL, "id": "get_time_1"}], tool_plan="plan"),
    ):
        events = events_of(CHAT.stream_events({}, recorded).encode())
        assert CHAT.reassemble_events(events) == recorded


def test_an_error_is_json_in_cohere_shape_even_when_a_stream_was_asked() -> None:
    error = CHAT.error_body("replay diverged", "flowproof_divergence", 409)
    assert error == {
        "id": "flowproof_divergence",
        "message": "flowproof_divergence: replay diverged",
    }
    rendered = CHAT.render({"stream": True}, 409, error, stream=True)
    assert rendered.content_type == "application/json"
    with pytest.raises(cohere.core.api_error.ApiError) as raised:
        client_of(rendered).chat(model="m", messages=[])
    assert raised.value.status_code == 409


# -- trajectory and mocks ------------------------------------------------------------------


def test_tool_calls_and_text_reach_the_trajectory() -> None:
    asked = {"messages": [{"role": "system", "content": "Be brief."}]}
    turn = CHAT.assistant_turn(asked, answer(None, [CALL], tool_plan="plan"), 2)
    assert turn.tool_calls == (ToolCall("get_weather", ARGS, 2, "get_weather_k2x9"),)
    assert turn.text is None and turn.thread_key == "Be brief."
    thinking = [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Sunny."}]
    assert CHAT.assistant_turn({}, answer(None, content=thinking), 3).text == "Sunny."


def test_results_are_mocked_by_call_id_whatever_their_blocks() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "assistant", "tool_plan": "p", "tool_calls": [CALL]},
            {
                "role": "tool",
                "tool_call_id": CALL["id"],
                "content": [{"type": "document", "document": {"data": '{"real": 1}'}}],
            },
            {"role": "tool", "tool_call_id": "unknown", "content": "left alone"},
        ],
    }
    mocked = CHAT.apply_mocks(body, {"get_weather": '{"forecast":"sunny"}'}, {})
    assert mocked["messages"][1]["content"] == '{"forecast":"sunny"}'
    assert mocked["messages"][2]["content"] == "left alone"


# -- upstream ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("https://api.cohere.com", "/v2/chat", "https://api.cohere.com/v2/chat"),
        ("https://api.cohere.com/", "/v1/rerank", "https://api.cohere.com/v1/rerank"),
        ("http://127.0.0.1:8080/v1", "/v2/embed", "http://127.0.0.1:8080/v2/embed"),
        (
            "http://127.0.0.1:8080/proxy",
            "/x/v2/chat?a=1",
            "http://127.0.0.1:8080/proxy/v2/chat?a=1",
        ),
    ],
)
def test_upstream_url_keeps_the_agents_path_from_its_version(
    base: str, path: str, url: str
) -> None:
    assert route(path.split("?", maxsplit=1)[0]).upstream_url_for_path(base, path) == url  # type: ignore[union-attr]


def test_record_forwards_plain_with_the_key_as_bearer_and_replay_streams() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    recorder = CassetteSession(Mode.RECORD, upstream=Upstream("https://api.cohere.com", "co-key"))
    forward = recorder.on_request("/v2/chat", json.dumps(body).encode())
    assert isinstance(forward, Forward)
    assert forward.url == "https://api.cohere.com/v2/chat"
    assert forward.headers == {"authorization": "Bearer co-key"}
    assert json.loads(forward.body)["stream"] is False
    recorder.on_upstream_response(forward.pending, 200, json.dumps(answer("Hello!")).encode())
    assert recorder.errors == [] and "stream" not in recorder.recorded[0].request

    replayer = CassetteSession(Mode.REPLAY, recorded=list(recorder.recorded))
    served = replayer.on_request("/v2/chat", json.dumps(body).encode())
    assert isinstance(served, Rendered) and served.content_type == "text/event-stream"


def test_an_upstream_error_reaches_the_agent_as_cohere_sent_it_and_fails_the_record() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    recorder = CassetteSession(Mode.RECORD, upstream=Upstream("https://api.cohere.com", "bad"))
    forward = recorder.on_request("/v2/chat", json.dumps(body).encode())
    assert isinstance(forward, Forward)
    raw = json.dumps({"id": "x", "message": "invalid api token"}).encode()
    rendered = recorder.on_upstream_response(forward.pending, 401, raw)
    assert (rendered.status, rendered.body) == (401, raw)
    assert recorder.errors and "turn 1 with HTTP 401" in recorder.errors[0]
    assert "invalid api token" in recorder.errors[0]


# -- endpoints -----------------------------------------------------------------------------


def test_embed_is_an_endpoint_read_back_by_the_sdk() -> None:
    asked = {"model": "embed-v4.0", "texts": ["a question"], "input_type": "search_query"}
    vectors = {
        "id": "e1",
        "embeddings": {"float": [[0.25, 0.5, 0.75]]},
        "texts": ["a question"],
        "response_type": "embeddings_by_type",
    }
    assert EMBED.kind == "endpoint" and [m.role for m in EMBED.outline(asked).messages] == ["texts"]
    assert EMBED.describe_request(asked) == "texts: a question"
    assert EMBED.describe_answer(vectors) == "1 float vector of 3"
    rendered = EMBED.render(asked, 200, vectors, stream=False)
    embedded = client_of(rendered).embed(
        model="embed-v4.0", texts=["a question"], input_type="search_query"
    )
    assert embedded.embeddings.float_ == [[0.25, 0.5, 0.75]]


def test_rerank_v1_and_v2_are_protocols_of_their_own() -> None:
    asked = {"model": "rerank-v3.5", "query": "rain", "documents": ["rain in March", "museums"]}
    ranked = {"id": "r1", "results": [{"index": 0, "relevance_score": 0.9}]}
    assert RERANK.describe_answer(ranked) == "1 result: 0 (0.9)"
    session = CassetteSession(Mode.REPLAY, recorded=[Turn("cohere-rerank-v1", asked, 200, ranked)])
    refused = session.on_request("/v2/rerank", json.dumps(asked).encode())
    assert isinstance(refused, Rendered) and refused.status == 409
    assert (
        "protocol changed: recorded cohere-rerank-v1, replayed cohere-rerank"
        in refused.body.decode()
    )


# -- the conversation view -----------------------------------------------------------------


def test_the_conversation_view_reads_a_streamed_turn_and_an_error() -> None:
    body = CHAT.render({"stream": True}, 200, answer(None, [CALL], tool_plan="p"), stream=True).body
    lines = model_response(CHAT, {}, body, 200, "text/event-stream")
    assert "reassembled from" in lines[0] and lines[2] == f"-> calls get_weather {ARGS}"
    error = json.dumps({"id": "x", "message": "invalid api token"}).encode()
    assert (
        model_response(CHAT, {}, error, 401, "application/json")[-1] == "error: invalid api token"
    )
