"""Ollama's native API: routing, the NDJSON stream (read back by the real `ollama` client),
streaming by default, results paired with calls by id, name or position, the upstream URL
and body, errors; and its endpoints `/api/embed` and `/api/generate`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import ollama
import pytest

from flowproof_addons.conversation import model_request, model_response
from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.dialects import Rendered, dialect_named, route
from flowproof_cli.dialects.base import ResultSequence
from flowproof_cli.dialects.ollama import NDJSON, OllamaChat, ndjson_payloads
from flowproof_cli.dialects.ollama_endpoints import OllamaEmbed, OllamaGenerate
from flowproof_cli.trajectory import ToolCall

CHAT = OllamaChat()
EMBED = OllamaEmbed()
GENERATE = OllamaGenerate()
LONG_TEXT = "The weather in Nairobi is sunny with a light breeze, 24 degrees. Ünïcödé stays."
WEATHER = {"function": {"name": "get_weather", "arguments": {"city": "Nairobi", "days": 2}}}
TIME = {"function": {"name": "get_time", "arguments": {}}}
COUNTERS = {
    "total_duration": 4883583458,
    "load_duration": 1334875,
    "prompt_eval_count": 26,
    "prompt_eval_duration": 342546000,
    "eval_count": 282,
    "eval_duration": 4535599000,
}


def answer(content: str = "", calls: list[Any] | None = None, **message: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if calls:
        body["tool_calls"] = calls
    return {
        "model": "llama3.2",
        "created_at": "2026-01-01T09:00:00.123456789Z",
        "message": body,
        "done": True,
        "done_reason": "stop",
        **COUNTERS,
    }


def request(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": "llama3.2", "messages": list(messages), **fields}


def served_to_client(rendered: Rendered, *, stream: bool) -> Any:
    """What the real `ollama` client makes of a rendered answer."""

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(
            rendered.status, content=rendered.body, headers={"content-type": rendered.content_type}
        )

    client = ollama.Client(host="http://127.0.0.1:9", transport=httpx.MockTransport(handler))
    return client.chat(model="llama3.2", messages=[], stream=stream)


# -- routing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/chat", "ollama-chat"),
        ("/prefix/api/chat/", "ollama-chat"),
        ("/api/embed", "ollama-embed"),
        ("/api/generate", "ollama-generate"),
        ("/api/embeddings", "ollama-embeddings"),  # not OpenAI's `.../embeddings`
    ],
)
def test_native_paths_route_to_ollama(path: str, name: str) -> None:
    dialect = route(path)
    assert dialect is not None and dialect.name == name
    assert dialect.provider == "ollama"
    assert dialect_named(name) is dialect


def test_ollamas_openai_compatible_paths_stay_openais() -> None:
    for path, name in (
        ("/v1/chat/completions", "openai-chat"),
        ("/v1/embeddings", "openai-embeddings"),
    ):
        dialect = route(path)
        assert dialect is not None and dialect.name == name


@pytest.mark.parametrize("path", ["/api/tags", "/api/show", "/api/pull", "/api/ps"])
def test_model_management_routes_are_no_model_endpoint(path: str) -> None:
    assert route(path) is None


# -- streaming is the default --------------------------------------------------------------


def test_a_request_without_stream_false_wants_a_stream() -> None:
    assert CHAT.wants_stream({"model": "m"})
    assert CHAT.wants_stream({"stream": True})
    assert not CHAT.wants_stream({"stream": False})


def test_stream_is_transport_never_matched_and_record_asks_for_the_plain_answer() -> None:
    body = request({"role": "user", "content": "hi"})
    assert CHAT.canonical_request({**body, "stream": True}) == body
    assert CHAT.canonical_request({**body, "stream": False}) == body
    assert CHAT.upstream_body(body) == {**body, "stream": False}


# -- rendering, read back by the real client -----------------------------------------------


def test_plain_answer_reads_back_as_the_recorded_chat_response() -> None:
    recorded = answer(LONG_TEXT)
    rendered = CHAT.render(request(), 200, recorded, stream=False)
    assert rendered.content_type == "application/json"
    response = served_to_client(rendered, stream=False)
    assert response.message.content == LONG_TEXT
    assert response.eval_count == 282


def test_stream_is_ndjson_the_real_client_joins_to_the_recorded_answer() -> None:
    recorded = answer(LONG_TEXT, thinking="First the city, then the sky.")
    rendered = CHAT.render(request(), 200, recorded, stream=True)
    assert rendered.content_type == NDJSON
    lines = [json.loads(line) for line in rendered.body.decode().splitlines()]
    assert len(lines) > 3 and all(line["created_at"] == recorded["created_at"] for line in lines)
    assert [line["done"] for line in lines] == [False] * (len(lines) - 1) + [True]
    chunks = list(served_to_client(rendered, stream=True))
    assert "".join(c.message.content or "" for c in chunks) == LONG_TEXT
    assert "".join(c.message.thinking or "" for c in chunks) == "First the city, then the sky."
    assert chunks[-1].done_reason == "stop" and chunks[-1].total_duration == 4883583458


def test_streamed_tool_calls_arrive_whole_in_one_line() -> None:
    rendered = CHAT.render(request(), 200, answer("", [WEATHER, TIME]), stream=True)
    chunks = list(served_to_client(rendered, stream=True))
    calls = [call for c in chunks for call in c.message.tool_calls or []]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Nairobi", "days": 2}),
        ("get_time", {}),
    ]


def test_a_stream_reassembles_to_the_answer_it_was_synthesized_from() -> None:
    recorded = answer(LONG_TEXT, [WEATHER], thinking="hmm")
    body = CHAT.stream_events(request(), recorded).encode()
    whole, how = CHAT.answer_from_body(body, NDJSON)
    assert whole["message"] == recorded["message"]
    assert whole["eval_count"] == 282
    assert how == f", reassembled from {len(ndjson_payloads(body))} NDJSON lines"
    assert CHAT.answer_from_body(json.dumps(recorded).encode(), "application/json")[1] == ""
    with pytest.raises(ValueError):
        CHAT.reassembled(b"not json\n")


def test_an_error_is_json_in_ollamas_shape_even_when_a_stream_was_asked() -> None:
    error = CHAT.error_body("replay diverged", "flowproof_divergence", 409)
    assert error == {"error": "flowproof_divergence: replay diverged"}
    rendered = CHAT.render(request(), 409, error, stream=True)
    assert rendered.content_type == "application/json"
    with pytest.raises(ollama.ResponseError) as raised:
        served_to_client(rendered, stream=False)
    assert raised.value.status_code == 409 and "replay diverged" in raised.value.error


# -- trajectory ----------------------------------------------------------------------------


def test_tool_calls_carry_object_arguments_as_canonical_json() -> None:
    turn = CHAT.assistant_turn(request(), answer("", [WEATHER, {**TIME, "id": "call_1"}]), 3)
    assert turn.tool_calls == (
        ToolCall("get_weather", '{"city":"Nairobi","days":2}', 3, None),
        ToolCall("get_time", "{}", 3, "call_1"),
    )
    assert turn.text is None


def test_the_reply_is_the_content_and_the_system_prompt_its_thread() -> None:
    asked = request({"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"})
    turn = CHAT.assistant_turn(asked, answer("Sunny."), 1)
    assert turn.text == "Sunny." and turn.thread_key == "Be brief."


# -- mocks: a result found by id, by name, or by position ----------------------------------


def test_results_are_mocked_by_tool_name_by_position_and_by_id() -> None:
    body = request(
        {"role": "user", "content": "weather"},
        {"role": "assistant", "content": "", "tool_calls": [WEATHER, TIME]},
        {"role": "tool", "content": "real weather"},  # no name: the first call's
        {"role": "tool", "content": "real time", "tool_name": "get_time"},
        {"role": "assistant", "content": "", "tool_calls": [{**TIME, "id": "c9"}]},
        {"role": "tool", "content": "real time again", "tool_call_id": "c9"},
    )
    mocks = {"get_weather": '{"forecast":"sunny"}', "get_time": ("t1", "t2")}
    mocked = CHAT.apply_mocks(body, mocks, {})
    assert [m["content"] for m in mocked["messages"] if m["role"] == "tool"] == [
        '{"forecast":"sunny"}',
        "t1",
        "t2",
    ]
    assert body["messages"][2]["content"] == "real weather"  # the input is left alone


def test_a_result_beyond_its_tools_results_is_refused_through_the_session() -> None:
    body = request(
        {"role": "assistant", "content": "", "tool_calls": [TIME]},
        {"role": "tool", "content": "a", "tool_name": "get_time"},
        {"role": "tool", "content": "b", "tool_name": "get_time"},
    )
    session = CassetteSession(Mode.REPLAY, mocks={"get_time": ResultSequence(["t1"])})
    refused = session.on_request("/api/chat", json.dumps(body).encode())
    assert isinstance(refused, Rendered) and refused.status == 422
    assert "get_time` was called 2 times but its `results` lists 1" in refused.body.decode()


# -- through the session: record forwards plain, replay serves the stream ------------------


def test_record_forwards_to_the_servers_api_path_and_replay_streams_the_turn() -> None:
    body = request({"role": "user", "content": "hi"})
    recorder = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:11434/", None))
    forward = recorder.on_request("/api/chat", json.dumps(body).encode())
    assert isinstance(forward, Forward)
    assert forward.url == "http://127.0.0.1:11434/api/chat"
    assert json.loads(forward.body) == {**body, "stream": False}
    assert forward.headers == {}  # a local Ollama takes no key
    recorder.on_upstream_response(forward.pending, 200, json.dumps(answer("Hello!")).encode())
    assert recorder.errors == [] and recorder.recorded[0].protocol == "ollama-chat"

    replayer = CassetteSession(Mode.REPLAY, recorded=list(recorder.recorded))
    served = replayer.on_request("/api/chat", json.dumps(body).encode())  # no stream: false
    assert isinstance(served, Rendered) and served.content_type == NDJSON
    assert "".join(c.message.content for c in served_to_client(served, stream=True)) == "Hello!"


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434/api/chat"),
        ("http://127.0.0.1:11434/api/", "http://127.0.0.1:11434/api/chat"),
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/api/chat"),
        ("https://ollama.com", "https://ollama.com/api/chat"),
    ],
)
def test_upstream_url_under_any_base_the_user_gives(base: str, url: str) -> None:
    assert CHAT.upstream_url_for_path(base, "/api/chat") == url


def test_the_cloud_key_travels_as_bearer() -> None:
    upstream = Upstream("https://ollama.com", "ol-key")
    assert upstream.auth_headers(CHAT) == {"authorization": "Bearer ol-key"}


# -- /api/embed and /api/generate ----------------------------------------------------------


def test_embed_is_an_endpoint_outlined_by_its_input_and_never_streamed() -> None:
    asked = {"model": "nomic-embed-text", "input": ["a question", "a note"], "truncate": True}
    outline = EMBED.outline(asked)
    assert [m.role for m in outline.messages] == ["input"]
    assert outline.parameters == {"truncate": True}
    assert EMBED.kind == "endpoint" and not EMBED.wants_stream({"stream": True})
    assert EMBED.describe_request(asked) == "input: a question | a note"
    vectors = {"model": "m", "embeddings": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]}
    assert EMBED.describe_answer(vectors) == "2 vectors of 3"
    assert EMBED.assistant_turn(asked, vectors, 1).text is None
    assert EMBED.upstream_url_for_path("http://h:11434", "/api/embed") == "http://h:11434/api/embed"
    assert EMBED.error_body("x", "k", 404) == {"error": "k: x"}


def test_embed_replays_its_vectors_and_a_changed_input_diverges() -> None:
    asked = {"model": "nomic-embed-text", "input": ["a question"]}
    vectors = {"model": "nomic-embed-text", "embeddings": [[0.1, 0.2]]}
    session = CassetteSession(Mode.REPLAY, recorded=[Turn("ollama-embed", asked, 200, vectors)])
    served = session.on_request("/api/embed", json.dumps(asked).encode())
    assert isinstance(served, Rendered) and json.loads(served.body) == vectors
    changed = {**asked, "input": ["another question"]}
    session = CassetteSession(Mode.REPLAY, recorded=[Turn("ollama-embed", asked, 200, vectors)])
    refused = session.on_request("/api/embed", json.dumps(changed).encode())
    assert isinstance(refused, Rendered) and refused.status == 409
    assert "the ollama-embed `input` content changed" in json.loads(refused.body)["error"]


def test_the_legacy_embeddings_call_is_ollamas_endpoint() -> None:
    legacy = route("/api/embeddings")
    assert legacy is not None and legacy.kind == "endpoint"
    assert legacy.describe_request({"model": "m", "prompt": "a question"}) == "prompt: a question"
    assert legacy.describe_answer({"embedding": [0.1, 0.2]}) == "1 vector of 2"
    assert legacy.upstream_url_for_path("http://h:11434", "/api/embeddings") == (
        "http://h:11434/api/embeddings"
    )


def test_generate_streams_ndjson_by_default_and_reads_back_whole() -> None:
    recorded = {
        "model": "llama3.2",
        "created_at": "2026-01-01T09:00:00Z",
        "response": LONG_TEXT,
        "done": True,
        "done_reason": "stop",
        "context": [1, 2, 3],
        **COUNTERS,
    }
    asked = {"model": "llama3.2", "prompt": "Weather?"}
    assert GENERATE.wants_stream(asked) and GENERATE.upstream_body(asked)["stream"] is False
    rendered = GENERATE.render(asked, 200, recorded, stream=True)
    assert rendered.content_type == NDJSON

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=rendered.body, headers={"content-type": NDJSON})

    client = ollama.Client(host="http://127.0.0.1:9", transport=httpx.MockTransport(handler))
    chunks = list(client.generate(model="llama3.2", prompt="Weather?", stream=True))
    assert "".join(chunk.response for chunk in chunks) == LONG_TEXT
    assert chunks[-1].context == [1, 2, 3]
    whole, _ = GENERATE.answer_from_body(rendered.body, NDJSON)
    assert whole == recorded
    assert GENERATE.describe_answer(recorded).startswith("response: The weather in Nairobi")


# -- the conversation view -----------------------------------------------------------------


def test_the_conversation_view_reads_a_streamed_turn_and_an_embedding() -> None:
    asked = request({"role": "user", "content": "Weather in Nairobi?"}, tools=[WEATHER])
    lines = model_request(CHAT, "/api/chat", json.dumps(asked).encode(), set())
    assert lines[0].startswith("ollama-chat request, model llama3.2, streamed")
    body = CHAT.render(asked, 200, answer("", [WEATHER]), stream=True).body
    lines = model_response(CHAT, asked, body, 200, NDJSON)
    assert lines[0].endswith("NDJSON lines") and lines[2] == (
        '-> calls get_weather {"city":"Nairobi","days":2}'
    )
    vectors = json.dumps({"embeddings": [[0.1, 0.2]]}).encode()
    shown = model_response(EMBED, {"input": ["x"]}, vectors, 200, "application/json")
    assert shown[-1] == "1 vector of 2"
    error = model_response(CHAT, asked, b'{"error": "model not found"}', 404, "application/json")
    assert error[-1] == "error: model not found"
