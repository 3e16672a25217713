"""The Google Gemini dialect: path folding, canonical form, mocks, trajectory, outline,
rendering (read back by the real google-genai SDK), upstream URL and errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from flowproof_addons.guard import is_claimed
from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream, divergence
from flowproof_cli.dialects import Rendered, dialect_named, route
from flowproof_cli.dialects.gemini import GeminiGenerateContent
from flowproof_cli.trajectory import AssistantTurn, ToolCall
from tests.fakes.fake_upstream import FakeUpstream

GEMINI = GeminiGenerateContent()
MODEL = "gemini-2.5-flash"
PATH = f"/v1beta/models/{MODEL}:generateContent"
STREAM_PATH = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
SYSTEM = "You are a weather assistant. Use the tools."
LONG_TEXT = (
    "The weather in Nairobi is sunny with a light breeze, 24 degrees Celsius, "
    "and no rain is expected before the evening. Ünïcödé stays intact."
)
WEATHER_ARGS: dict[str, Any] = {"unit": "celsius", "city": "Nairobi", "days": [1, 2]}
TOOLS: list[dict[str, Any]] = [
    {
        "functionDeclarations": [
            {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"city": {"type": "STRING"}},
                    "required": ["city"],
                },
            },
            {"name": "get_time", "description": "The current UTC time."},
        ]
    }
]


def call_part(name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        call["id"] = call_id
    return {"functionCall": call}


def result_part(name: str, response: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": response, **extra}}


def response(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"parts": parts, "role": "model"},
                "finishReason": "STOP",
                "avgLogprobs": -0.25,
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 42, "candidatesTokenCount": 9, "totalTokenCount": 51},
        "modelVersion": MODEL,
        "responseId": "resp-abc123",
        **extra,
    }


def conversation(**extra: Any) -> dict[str, Any]:
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Nairobi? Use both tools."}]},
            {
                "role": "model",
                "parts": [
                    call_part("get_weather", {"city": "Nairobi"}),
                    call_part("get_time", {}),
                ],
            },
            {
                "role": "user",
                "parts": [
                    result_part("get_weather", {"forecast": "sunny"}),
                    result_part("get_time", {"utc": "2026-05-05T10:11:12Z"}),
                ],
            },
        ],
        "systemInstruction": {"role": "user", "parts": [{"text": SYSTEM}]},
        "tools": copy.deepcopy(TOOLS),
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"temperature": 0.2},
        "model": MODEL,
        **extra,
    }


# --- routing and normalize ---------------------------------------------------------------


def test_name_routes_and_registry() -> None:
    assert GEMINI.name == "gemini"
    assert GEMINI.route_suffixes == (":generateContent", ":streamGenerateContent")
    assert isinstance(dialect_named("gemini"), GeminiGenerateContent)


@pytest.mark.parametrize(
    "path",
    [
        PATH,
        STREAM_PATH,
        f"/v1/models/{MODEL}:generateContent",
        f"/v1/models/{MODEL}:streamGenerateContent?alt=sse",
        f"/models/{MODEL}:generateContent",
        f"/v1/v1beta/models/{MODEL}:generateContent/",
        "/v1beta/tunedModels/my-tuned:generateContent",
        "/v1/projects/p/locations/us-central1/publishers/google/models/gemini:generateContent",
    ],
)
def test_gemini_paths_route_to_gemini(path: str) -> None:
    assert isinstance(route(path), GeminiGenerateContent)
    assert is_claimed(path) is True


@pytest.mark.parametrize(
    "path",
    [
        f"/v1beta/models/{MODEL}:generateAnswer",
        f"/v1beta/models/{MODEL}:embedText",
        "/v1beta/models/:generateContent",
        "/:generateContent",
        f"/v1beta/models/{MODEL}:generateContentx",
        f"/v1beta/models/{MODEL}",
        "/v1beta/models?x=:generateContent",
    ],
)
def test_other_gemini_paths_route_nowhere(path: str) -> None:
    assert route(path, method="POST") is None


def test_other_dialects_still_route() -> None:
    assert route("/v1/chat/completions") is dialect_named("openai-chat")
    assert route("/v1/messages") is dialect_named("anthropic")
    assert route("/v1/responses") is dialect_named("openai-responses")


def test_normalize_folds_the_model_in() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    original = copy.deepcopy(body)
    normalized = GEMINI.normalize(PATH, body)
    assert normalized == {**original, "model": MODEL}
    assert GEMINI.wants_stream(normalized) is False
    assert body == original


def test_normalize_streaming_path_sets_stream() -> None:
    normalized = GEMINI.normalize(STREAM_PATH, {"contents": []})
    assert normalized == {"contents": [], "model": MODEL, "stream": True}
    assert GEMINI.wants_stream(normalized) is True
    assert GEMINI.canonical_request(normalized) == {"contents": [], "model": MODEL}


def test_normalize_json_array_stream_is_transport_too() -> None:
    path = f"/v1beta/models/{MODEL}:streamGenerateContent"
    normalized = GEMINI.normalize(path, {"contents": []})
    assert normalized["stream"] is True
    assert normalized["stream_options"] == {"alt": "json"}
    assert GEMINI.canonical_request(normalized) == {"contents": [], "model": MODEL}


def test_normalize_path_wins_and_keeps_other_collections() -> None:
    assert GEMINI.normalize(PATH, {"model": "other", "stream": True}) == {"model": MODEL}
    tuned = GEMINI.normalize("/v1beta/tunedModels/mine:generateContent", {})
    assert tuned == {"model": "tunedModels/mine"}


def test_canonical_request_keeps_every_field_but_transport() -> None:
    body = {**conversation(), "safetySettings": [{"category": "X"}], "stream": True}
    original = copy.deepcopy(body)
    assert GEMINI.canonical_request(body) == {k: v for k, v in original.items() if k != "stream"}
    assert body == original


# --- apply_mocks ---------------------------------------------------------------------------

MOCKS = {"get_time": '{"now":"2026-01-01T09:00:00Z"}'}


def results_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part["functionResponse"]
        for content in body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]


def test_object_mock_becomes_the_response_verbatim() -> None:
    body = conversation()
    original = copy.deepcopy(body)
    mocked = GEMINI.apply_mocks(body, MOCKS, {})
    assert results_of(mocked) == [
        {"name": "get_weather", "response": {"forecast": "sunny"}},
        {"name": "get_time", "response": {"now": "2026-01-01T09:00:00Z"}},
    ]
    assert body == original  # input untouched
    assert mocked["contents"][:2] == original["contents"][:2]
    assert {k: v for k, v in mocked.items() if k != "contents"} == {
        k: v for k, v in original.items() if k != "contents"
    }


@pytest.mark.parametrize(
    ("mock", "expected"),
    [
        ('"12:00"', {"output": "12:00"}),
        ("42", {"output": 42}),
        ("[1,2]", {"output": [1, 2]}),
        ("null", {"output": None}),
        ("{}", {}),
    ],
)
def test_non_object_mock_is_wrapped_as_output(mock: str, expected: dict[str, Any]) -> None:
    mocked = GEMINI.apply_mocks(conversation(), {"get_time": mock}, {})
    assert results_of(mocked)[1]["response"] == expected


def test_mock_keeps_the_id_and_other_fields_and_function_role() -> None:
    body = conversation()
    body["contents"][2] = {
        "role": "function",
        "parts": [result_part("get_time", {"utc": "x"}, id="call-7", willContinue=False)],
    }
    mocked = GEMINI.apply_mocks(body, MOCKS, {})
    assert mocked["contents"][2] == {
        "role": "function",
        "parts": [
            result_part(
                "get_time", {"now": "2026-01-01T09:00:00Z"}, id="call-7", willContinue=False
            )
        ],
    }


def test_nameless_result_is_found_by_id() -> None:
    body = conversation()
    body["contents"][2]["parts"] = [{"functionResponse": {"id": "c1", "response": {"utc": "x"}}}]
    mocked = GEMINI.apply_mocks(body, MOCKS, {"c1": "get_time"})
    assert results_of(mocked) == [{"id": "c1", "response": {"now": "2026-01-01T09:00:00Z"}}]
    body["contents"][1]["parts"] = [call_part("get_time", {}, call_id="c2")]
    body["contents"][2]["parts"] = [{"functionResponse": {"id": "c2", "response": {"utc": "x"}}}]
    assert results_of(GEMINI.apply_mocks(body, MOCKS, {}))[0]["response"] == {
        "now": "2026-01-01T09:00:00Z"
    }
    body["contents"][2]["parts"] = [{"functionResponse": {"id": "zz", "response": {"utc": "x"}}}]
    assert GEMINI.apply_mocks(body, MOCKS, {}) == body  # an unknown call is left alone


def test_snake_case_parts_are_mocked_in_their_spelling() -> None:
    body = {"contents": [{"role": "user", "parts": [{"function_response": {"name": "get_time"}}]}]}
    mocked = GEMINI.apply_mocks(body, MOCKS, {})
    assert mocked["contents"][0]["parts"] == [
        {"function_response": {"name": "get_time", "response": {"now": "2026-01-01T09:00:00Z"}}}
    ]


def test_no_mocks_or_no_contents_returns_the_body() -> None:
    body = conversation()
    assert GEMINI.apply_mocks(body, {}, {}) is body
    assert GEMINI.apply_mocks({"model": MODEL}, MOCKS, {}) == {"model": MODEL}
    assert GEMINI.apply_mocks(body, {"delete_city": "{}"}, {}) == body


# --- assistant_turn ------------------------------------------------------------------------


def test_assistant_turn_tool_calls() -> None:
    request = conversation()
    answer = response(
        [
            {"text": "thinking about it", "thought": True},
            call_part("get_weather", WEATHER_ARGS, call_id="fc-1"),
            call_part("get_time", {}),
        ]
    )
    turn = GEMINI.assistant_turn(request, answer, 3)
    assert turn == AssistantTurn(
        turn=3,
        text=None,
        tool_calls=(
            ToolCall(
                name="get_weather",
                raw_arguments='{"city":"Nairobi","days":[1,2],"unit":"celsius"}',
                turn=3,
                call_id="fc-1",
            ),
            ToolCall(name="get_time", raw_arguments="{}", turn=3, call_id=None),
        ),
        thread_key=SYSTEM,
        request_size=len(json.dumps(request["contents"])),
    )
    assert GEMINI.call_names(answer) == {"fc-1": "get_weather"}


def test_assistant_turn_text_joins_text_parts() -> None:
    answer = response([{"text": "The weather "}, {"text": "is sunny."}])
    turn = GEMINI.assistant_turn({"contents": []}, answer, 1)
    assert turn.text == "The weather is sunny."
    assert turn.tool_calls == ()
    assert turn.thread_key == ""
    assert turn.request_size == 2


def test_assistant_turn_without_candidates() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}}
    turn = GEMINI.assistant_turn(conversation(), blocked, 1)
    assert turn.text is None and turn.tool_calls == ()


# --- outline and divergence ----------------------------------------------------------------


def test_outline() -> None:
    request = conversation()
    outline = GEMINI.outline(request)
    assert outline.model == MODEL
    assert list(outline.tools) == ["get_weather", "get_time"]
    assert outline.tools["get_weather"] == TOOLS[0]["functionDeclarations"][0]
    assert [m.role for m in outline.messages] == ["system", "user", "model", "user"]
    system, user, model, results = outline.messages
    assert system.content == SYSTEM
    assert system.raw == request["systemInstruction"]
    assert user.content == request["contents"][0]["parts"]
    assert user.raw == request["contents"][0]
    assert model.tool_calls == (("get_weather", '{"city":"Nairobi"}'), ("get_time", "{}"))
    assert results.tool_calls == ()
    assert outline.parameters == {
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"temperature": 0.2},
    }


def test_outline_without_system_and_with_builtin_tools() -> None:
    outline = GEMINI.outline(
        {"contents": [{"parts": [{"text": "hi"}]}], "tools": [{"googleSearch": {}}]}
    )
    assert outline.model is None
    assert outline.tools == {"googleSearch": {}}
    assert [m.role for m in outline.messages] == ["user"]


def explain(recorded: dict[str, Any], replayed: dict[str, Any]) -> divergence.Divergence:
    return divergence.explain(1, Turn("gemini", recorded, 200, response([])), "gemini", replayed)


def test_divergence_system_instruction() -> None:
    replayed = conversation()
    replayed["systemInstruction"]["parts"][0]["text"] = "You were a weather assistant."
    found = explain(conversation(), replayed)
    assert found.summary == "turn 1: message 0 (system) content changed"
    assert found.details == (f"recorded: {SYSTEM}", "replayed: You were a weather assistant.")


def test_divergence_argument_drift_names_the_path() -> None:
    replayed = conversation()
    replayed["contents"][1]["parts"][0] = call_part("get_weather", {"city": "Paris"})
    found = explain(conversation(), replayed)
    assert found.summary == (
        "turn 1: tool-call arguments drifted in message 2 (model): "
        "get_weather.city: recorded Nairobi, replayed Paris"
    )


def test_divergence_tool_schema_and_model() -> None:
    replayed = conversation()
    schema = replayed["tools"][0]["functionDeclarations"][0]["parameters"]
    schema["properties"]["city"]["type"] = "INTEGER"
    found = explain(conversation(), replayed)
    assert found.summary == "turn 1: tools offered changed: the declaration of get_weather changed"
    assert "get_weather.parameters.properties.city.type: recorded STRING, replayed INTEGER" in (
        found.details
    )
    found = explain(conversation(), conversation(model="gemini-2.5-pro"))
    assert found.summary.startswith("turn 1: model changed: recorded gemini-2.5-flash")


def test_divergence_user_text_and_parameters() -> None:
    replayed = conversation()
    replayed["contents"][0]["parts"][0]["text"] = "Weather in Paris?"
    found = explain(conversation(), replayed)
    assert found.summary == "turn 1: message 1 (user) content changed"
    assert found.details[0].startswith("content.0.text: recorded Weather in Nairobi")
    found = explain(conversation(), conversation(generationConfig={"temperature": 0.9}))
    assert found.summary.startswith("turn 1: request parameters changed: generationConfig")


# --- render --------------------------------------------------------------------------------


def events(rendered: Rendered) -> list[dict[str, Any]]:
    text = rendered.body.decode()
    assert text.endswith("\n\n") and "[DONE]" not in text
    blocks = text.split("\n\n")[:-1]
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks)
    return [json.loads(block[len("data: ") :]) for block in blocks]


def test_render_json_as_recorded() -> None:
    recorded = response([{"text": LONG_TEXT}])
    rendered = GEMINI.render(conversation(), 200, recorded, stream=False)
    assert rendered.status == 200 and rendered.content_type == "application/json"
    assert json.loads(rendered.body) == recorded
    assert "Ünïcödé".encode() in rendered.body


def test_render_error_is_json_even_for_a_stream() -> None:
    error = GEMINI.error_body("quota", "flowproof_upstream_error", 429)
    rendered = GEMINI.render(conversation(stream=True), 429, error, stream=True)
    assert (rendered.status, rendered.content_type) == (429, "application/json")
    assert json.loads(rendered.body) == error


def test_render_stream_splits_text_and_ends_with_finish_and_usage() -> None:
    recorded = response([{"text": LONG_TEXT}])
    rendered = GEMINI.render(conversation(stream=True), 200, recorded, stream=True)
    assert rendered.content_type == "text/event-stream"
    chunks = events(rendered)
    assert len(chunks) >= 2
    texts = [chunk["candidates"][0]["content"]["parts"][0]["text"] for chunk in chunks]
    assert "".join(texts) == LONG_TEXT
    for chunk in chunks:
        assert chunk["modelVersion"] == MODEL and chunk["responseId"] == "resp-abc123"
        assert chunk["candidates"][0]["content"]["role"] == "model"
        assert chunk["candidates"][0]["index"] == 0
    for chunk in chunks[:-1]:
        assert "finishReason" not in chunk["candidates"][0] and "usageMetadata" not in chunk
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["candidates"][0]["avgLogprobs"] == -0.25
    assert last["usageMetadata"] == recorded["usageMetadata"]


def test_render_stream_function_calls_go_whole() -> None:
    parts = [
        {"text": "Checking both."},
        call_part("get_weather", WEATHER_ARGS),
        call_part("get_time", {}),
    ]
    chunks = events(GEMINI.render({}, 200, response(parts), stream=True))
    streamed = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
    assert streamed[-2:] == parts[1:]
    assert "".join(part.get("text", "") for part in streamed) == "Checking both."
    assert chunks[-1]["candidates"][0]["content"]["parts"] == [parts[2]]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def test_render_stream_thought_parts_keep_their_flag_and_signature() -> None:
    thought = {"text": LONG_TEXT, "thought": True, "thoughtSignature": "c2ln"}
    chunks = GEMINI.stream_chunks(response([thought, {"text": "ok"}]))
    thought_parts = [
        c["candidates"][0]["content"]["parts"][0]
        for c in chunks
        if c["candidates"][0]["content"]["parts"][0].get("thought")
    ]
    assert len(thought_parts) >= 2
    assert "".join(p["text"] for p in thought_parts) == LONG_TEXT
    assert [p.get("thoughtSignature") for p in thought_parts][-1] == "c2ln"
    assert all("thoughtSignature" not in p for p in thought_parts[:-1])


def test_render_stream_is_deterministic() -> None:
    recorded = response([{"text": LONG_TEXT}, call_part("get_weather", WEATHER_ARGS)])
    first = GEMINI.render(conversation(), 200, recorded, stream=True)
    second = GEMINI.render(conversation(), 200, copy.deepcopy(recorded), stream=True)
    assert first.body == second.body


def test_render_stream_without_candidates_is_one_chunk() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "responseId": "r"}
    assert events(GEMINI.render({}, 200, blocked, stream=True)) == [blocked]


def test_render_stream_several_candidates_are_indexed() -> None:
    recorded = {
        "candidates": [
            {"content": {"parts": [{"text": "one"}], "role": "model"}, "finishReason": "STOP"},
            {"content": {"parts": [{"text": "two"}], "role": "model"}, "finishReason": "STOP"},
        ],
        "usageMetadata": {"totalTokenCount": 3},
    }
    chunks = GEMINI.stream_chunks(recorded)
    assert [c["candidates"][0]["index"] for c in chunks] == [0, 0, 1, 1]
    assert "usageMetadata" in chunks[-1] and "usageMetadata" not in chunks[1]


def test_render_json_array_stream() -> None:
    request = GEMINI.normalize(f"/v1beta/models/{MODEL}:streamGenerateContent", {"contents": []})
    recorded = response([{"text": LONG_TEXT}])
    rendered = GEMINI.render(request, 200, recorded, stream=GEMINI.wants_stream(request))
    assert rendered.content_type == "application/json"
    assert json.loads(rendered.body) == GEMINI.stream_chunks(recorded)


# --- the real google-genai SDK reads what is rendered ---------------------------------------

SDK_CONFIG = types.GenerateContentConfig(
    system_instruction=SYSTEM,
    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
)


def sdk_client(recorded: dict[str, Any], status: int = 200) -> tuple[genai.Client, list[str]]:
    """A google-genai client whose transport is the dialect rendering `recorded`."""
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode()
        paths.append(path)
        body = GEMINI.normalize(path, json.loads(request.content))
        rendered = GEMINI.render(body, status, recorded, stream=GEMINI.wants_stream(body))
        return httpx.Response(
            rendered.status, content=rendered.body, headers={"content-type": rendered.content_type}
        )

    options = types.HttpOptions(
        base_url="http://127.0.0.1:9", client_args={"transport": httpx.MockTransport(handler)}
    )
    return genai.Client(api_key="test-key", http_options=options), paths


def test_sdk_stream_reads_text_in_several_chunks() -> None:
    client, paths = sdk_client(response([{"text": LONG_TEXT}]))
    chunks = list(
        client.models.generate_content_stream(model=MODEL, contents="hi", config=SDK_CONFIG)
    )
    assert paths == [f"/v1/models/{MODEL}:streamGenerateContent?alt=sse"]
    assert len(chunks) >= 2
    assert "".join(chunk.text or "" for chunk in chunks) == LONG_TEXT
    assert chunks[-1].usage_metadata is not None
    assert chunks[-1].usage_metadata.total_token_count == 51
    assert chunks[-1].candidates and chunks[-1].candidates[0].finish_reason == "STOP"
    assert all(chunk.response_id == "resp-abc123" for chunk in chunks)


def test_sdk_stream_reads_function_calls_whole() -> None:
    client, _ = sdk_client(
        response([call_part("get_weather", WEATHER_ARGS, "fc-1"), call_part("get_time", {})])
    )
    calls = [
        call
        for chunk in client.models.generate_content_stream(
            model=MODEL, contents="hi", config=SDK_CONFIG
        )
        for call in chunk.function_calls or []
    ]
    assert [(c.name, c.args, c.id) for c in calls] == [
        ("get_weather", WEATHER_ARGS, "fc-1"),
        ("get_time", {}, None),
    ]


def test_sdk_reads_the_json_render() -> None:
    client, paths = sdk_client(response([{"text": LONG_TEXT}]))
    answer = client.models.generate_content(model=MODEL, contents="hi", config=SDK_CONFIG)
    assert paths == [f"/v1/models/{MODEL}:generateContent"]
    assert answer.text == LONG_TEXT


def test_sdk_reads_the_error_body() -> None:
    message = "flowproof: turn 1: model changed"
    client, _ = sdk_client(GEMINI.error_body(message, "flowproof_divergence", 409), status=409)
    with pytest.raises(genai_errors.ClientError) as info:
        client.models.generate_content(model=MODEL, contents="hi", config=SDK_CONFIG)
    assert info.value.code == 409
    assert info.value.message == message
    assert info.value.status == "ABORTED"
    assert info.value.details["error"]["details"][0]["reason"] == "flowproof_divergence"


def test_sdk_talks_to_the_fake_upstream_in_both_modes() -> None:
    tools = [types.Tool(function_declarations=[types.FunctionDeclaration(name="get_weather")])]
    config = types.GenerateContentConfig(
        tools=tools, automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)
    )
    with FakeUpstream(seed=3) as fake:
        client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=fake.base_url))
        plain = client.models.generate_content(
            model=MODEL, contents="Weather in Lima?", config=config
        )
        streamed = list(
            client.models.generate_content_stream(model=MODEL, contents="hi there", config=None)
        )
        assert [r.path for r in fake.model_requests()] == [
            f"/v1/models/{MODEL}:generateContent",
            f"/v1/models/{MODEL}:streamGenerateContent?alt=sse",
        ]
        assert fake.requests[0].headers["x-goog-api-key"] == "k"
    assert plain.function_calls and plain.function_calls[0].args == {"city": "Lima"}
    assert plain.model_version == MODEL and plain.response_id
    assert len(streamed) >= 2
    assert "".join(chunk.text or "" for chunk in streamed) == "Hello! You said: hi there"


# --- the session: record forwards the plain request, replay streams the recording -----------


def test_record_forwards_the_plain_request_upstream() -> None:
    session = CassetteSession(
        Mode.RECORD,
        mocks={"get_time": {"now": "2026-01-01T09:00:00Z"}},
        upstream=Upstream("https://generativelanguage.googleapis.com", "Bearer gm-key"),
    )
    body = {k: v for k, v in conversation().items() if k != "model"}
    outcome = session.on_request(STREAM_PATH, json.dumps(body).encode())
    assert isinstance(outcome, Forward)
    assert outcome.url == (
        f"https://generativelanguage.googleapis.com/v1beta/models/{MODEL}:generateContent"
    )
    assert outcome.headers == {"x-goog-api-key": "gm-key"}
    sent = json.loads(outcome.body)
    assert "model" not in sent and "stream" not in sent
    assert results_of(sent)[1]["response"] == {"now": "2026-01-01T09:00:00Z"}
    assert outcome.pending.canonical["model"] == MODEL
    assert "stream" not in outcome.pending.canonical

    answer = response([{"text": LONG_TEXT}])
    rendered = session.on_upstream_response(outcome.pending, 200, json.dumps(answer).encode())
    assert rendered.content_type == "text/event-stream"  # the agent asked for a stream
    assert session.recorded == [Turn("gemini", outcome.pending.canonical, 200, answer)]


def test_replay_answers_plain_and_streaming_clients_from_one_turn() -> None:
    body = {k: v for k, v in conversation().items() if k != "model"}
    answer = response([{"text": LONG_TEXT}])
    turns = [Turn("gemini", conversation(), 200, answer)] * 2
    session = CassetteSession(Mode.REPLAY, recorded=list(turns))
    plain = session.on_request(PATH, json.dumps(body).encode())
    assert isinstance(plain, Rendered) and json.loads(plain.body) == answer
    streamed = session.on_request(STREAM_PATH, json.dumps(body).encode())
    assert isinstance(streamed, Rendered) and streamed.content_type == "text/event-stream"
    assert session.trajectory().turns[0].text == LONG_TEXT


def test_replay_divergence_is_a_google_error() -> None:
    session = CassetteSession(Mode.REPLAY, recorded=[Turn("gemini", conversation(), 200, {})])
    body = {k: v for k, v in conversation().items() if k != "model"}
    other = "/v1beta/models/gemini-2.5-pro:generateContent"
    rendered = session.on_request(other, json.dumps(body).encode())
    assert isinstance(rendered, Rendered) and rendered.status == 409
    error = json.loads(rendered.body)["error"]
    assert error["code"] == 409 and error["status"] == "ABORTED"
    assert error["details"][0]["reason"] == "flowproof_divergence"
    assert "model changed" in error["message"]


# --- upstream and errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "path", "expected"),
    [
        (
            "https://generativelanguage.googleapis.com",
            PATH,
            f"https://generativelanguage.googleapis.com{PATH}",
        ),
        (
            "https://generativelanguage.googleapis.com/",
            STREAM_PATH,
            f"https://generativelanguage.googleapis.com/v1beta/models/{MODEL}:generateContent",
        ),
        (
            "https://generativelanguage.googleapis.com/v1beta",
            f"/v1/models/{MODEL}:generateContent",
            f"https://generativelanguage.googleapis.com/v1/models/{MODEL}:generateContent",
        ),
        (
            "http://127.0.0.1:8000",
            f"/v1/v1beta/models/{MODEL}:streamGenerateContent?alt=sse&key=placeholder&x=1",
            f"http://127.0.0.1:8000/v1beta/models/{MODEL}:generateContent?x=1",
        ),
        (
            "https://gateway.example/gemini",
            f"/v1beta/models/{MODEL}:generateContent?foo=a%20b",
            f"https://gateway.example/gemini/v1beta/models/{MODEL}:generateContent?foo=a+b",
        ),
        (
            "https://gateway.example/v1beta",
            f"/models/{MODEL}:generateContent",
            f"https://gateway.example/v1beta/models/{MODEL}:generateContent",
        ),
    ],
)
def test_upstream_url_for_path(base: str, path: str, expected: str) -> None:
    assert GEMINI.upstream_url_for_path(base, path) == expected
    assert Upstream(base).url_for(GEMINI, path) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [("AIza-1", {"x-goog-api-key": "AIza-1"}), ("Bearer AIza-2", {"x-goog-api-key": "AIza-2"})],
)
def test_upstream_auth(key: str, expected: dict[str, str]) -> None:
    assert GEMINI.upstream_auth(key) == expected
    assert Upstream("https://g.example", key).auth_headers(GEMINI) == expected


def test_upstream_body_drops_model_and_transport() -> None:
    body = {**conversation(), "stream": True, "stream_options": {"alt": "json"}}
    original = copy.deepcopy(body)
    sent = GEMINI.upstream_body(body)
    assert sent == {
        k: v for k, v in original.items() if k not in ("model", "stream", "stream_options")
    }
    assert body == original
    assert GEMINI.upstream_default_headers() == {}


@pytest.mark.parametrize(
    ("kind", "status", "name"),
    [
        ("flowproof_divergence", 409, "ABORTED"),
        ("invalid_request_error", 400, "INVALID_ARGUMENT"),
        ("invalid_request_error", 415, "INVALID_ARGUMENT"),
        ("flowproof_internal_error", 500, "INTERNAL"),
        ("flowproof_mock_exhausted", 422, "FAILED_PRECONDITION"),
        ("flowproof_upstream_error", 502, "UNAVAILABLE"),
        ("flowproof_no_upstream", 502, "UNAVAILABLE"),
        ("flowproof_refused", 405, "FAILED_PRECONDITION"),
        ("flowproof_refused", 505, "INTERNAL"),
    ],
)
def test_error_body_carries_the_status_it_is_sent_with(kind: str, status: int, name: str) -> None:
    """The body's `code` is the HTTP status whatever the kind (it said 409 under a 500)."""
    assert GEMINI.error_body("boom", kind, status) == {
        "error": {
            "code": status,
            "message": "boom",
            "status": name,
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": kind,
                    "domain": "flowproof",
                }
            ],
        }
    }
