"""Vertex AI's Gemini and Claude dialects: routing by the path's shape, the project, location
and model folded in and matched, the upstream URL and bearer auth, the synthesized streams
(read back by the real SDKs), the placeholder Google credentials and their injection."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx2  # anthropic 2.x runs on httpx2 and rejects `httpx` objects
import pytest

from flowproof_addons.canned import canned_reply
from flowproof_addons.conversation import model_response
from flowproof_addons.guard import is_claimed
from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.dialects import DIALECTS, Rendered, dialect_named, route
from flowproof_cli.dialects.vertex import (
    VertexAnthropic,
    VertexGemini,
    vertex_path,
)
from flowproof_cli.providers import file_variables, unknown_path_hint, write_agent_files
from flowproof_cli.providers.google_credentials import CREDENTIALS_VARIABLE, PLACEHOLDER_UNIVERSE
from flowproof_cli.runner.environment import agent_environment, task_file

GEMINI = VertexGemini()
CLAUDE = VertexAnthropic()
HOST = "https://us-central1-aiplatform.googleapis.com"
G_PATH = (
    "/v1beta1/projects/proj-a/locations/us-central1/publishers/google/models/"
    "gemini-2.5-flash:generateContent"
)
G_STREAM = G_PATH.replace(":generateContent", ":streamGenerateContent?alt=sse")
C_PATH = (
    "/v1/projects/proj-a/locations/us-east5/publishers/anthropic/models/"
    "claude-sonnet-4@20250514:rawPredict"
)
C_STREAM = C_PATH.replace(":rawPredict", ":streamRawPredict")
G_BODY: dict[str, Any] = {
    "contents": [{"role": "user", "parts": [{"text": "Weather in Nairobi?"}]}],
    "systemInstruction": {"parts": [{"text": "You are a weather assistant."}]},
}
C_BODY: dict[str, Any] = {
    "anthropic_version": "vertex-2023-10-16",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Weather in Nairobi?"}],
}
G_ANSWER: dict[str, Any] = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": "It is sunny in Nairobi today."}]},
            "finishReason": "STOP",
        }
    ],
    "modelVersion": "gemini-2.5-flash",
    "responseId": "r-1",
}
C_ANSWER: dict[str, Any] = {
    "id": "msg_vrtx_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4@20250514",
    "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Nairobi"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}


# --- routing --------------------------------------------------------------------------------


def test_registered_with_their_provider() -> None:
    assert dialect_named("vertex-gemini") is next(d for d in DIALECTS if d is route(G_PATH))
    assert dialect_named("vertex-anthropic") is route(C_PATH)
    assert GEMINI.provider == CLAUDE.provider == "vertex"


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (G_PATH, "vertex-gemini"),
        (G_STREAM, "vertex-gemini"),
        (
            "/v1/projects/p/locations/global/publishers/google/models/g:generateContent",
            "vertex-gemini",
        ),
        ("/v1/projects/p/locations/l/endpoints/1234:streamGenerateContent", "vertex-gemini"),
        ("/v1/publishers/google/models/gemini-2.5-flash:generateContent", "vertex-gemini"),
        ("/v1/projects/p/locations/l/publishers/meta/models/m:generateContent", "vertex-gemini"),
        (C_PATH, "vertex-anthropic"),
        (C_STREAM, "vertex-anthropic"),
        # The public Gemini API's paths end alike but have no Vertex shape.
        ("/v1beta/models/gemini-2.5-flash:generateContent", "gemini"),
        ("/v1beta/tunedModels/x:streamGenerateContent?alt=sse", "gemini"),
        ("/v1/endpoints/42:generateContent", "gemini"),  # an endpoint is under a project
        ("/v1/messages", "anthropic"),
    ],
)
def test_routing_by_the_path_shape(path: str, name: str) -> None:
    dialect = route(path)
    assert dialect is not None and dialect.name == name


@pytest.mark.parametrize(
    "path",
    [
        # AnthropicVertex counts tokens here: not a conversation turn, never the reply.
        "/v1/projects/p/locations/l/publishers/anthropic/models/count-tokens:rawPredict",
        "/v1/projects/p/locations/l/publishers/google/models/g:rawPredict",
        "/v1/projects/p/locations/l/publishers/google/models/g:predict",
    ],
)
def test_other_vertex_methods_are_not_claimed(path: str) -> None:
    assert route(path) is None
    assert not is_claimed(path)


def test_vertex_path_parts_are_unescaped() -> None:
    parts = vertex_path(
        "/v1/projects/my%2Dproj/locations/us-east5/publishers/anthropic/models/c%4020250514:rawPredict"
    )
    assert parts is not None
    assert (parts.project, parts.location, parts.publisher, parts.model, parts.method) == (
        "my-proj",
        "us-east5",
        "anthropic",
        "c@20250514",
        "rawPredict",
    )
    assert vertex_path("/v1beta/models/g:generateContent") is None


# --- the canonical request: model, project and location are matched ------------------------


def test_gemini_normalize_folds_model_project_location_and_stream() -> None:
    plain = GEMINI.normalize(G_PATH, G_BODY)
    assert (plain["model"], plain["project"], plain["location"]) == (
        "gemini-2.5-flash",
        "proj-a",
        "us-central1",
    )
    streamed = GEMINI.normalize(G_STREAM, G_BODY)
    assert GEMINI.wants_stream(streamed) and not GEMINI.wants_stream(plain)
    assert GEMINI.canonical_request(streamed) == GEMINI.canonical_request(plain)
    tuned = GEMINI.normalize("/v1/projects/p/locations/l/endpoints/42:generateContent", G_BODY)
    assert tuned["model"] == "endpoints/42"
    express = GEMINI.normalize("/v1/publishers/google/models/g:generateContent", G_BODY)
    assert express["model"] == "g" and "project" not in express


def test_claude_normalize_folds_the_path_and_the_stream() -> None:
    plain = CLAUDE.normalize(C_PATH, C_BODY)
    assert plain["model"] == "claude-sonnet-4@20250514"
    assert (plain["project"], plain["location"]) == ("proj-a", "us-east5")
    streamed = CLAUDE.normalize(C_STREAM, {**C_BODY, "stream": True})
    assert CLAUDE.wants_stream(streamed)
    assert CLAUDE.canonical_request(streamed) == CLAUDE.canonical_request(plain)


def _replay_one(dialect_name: str, path: str, body: dict[str, Any], answer: dict[str, Any]):
    dialect = dialect_named(dialect_name)
    canonical = dialect.canonical_request(dialect.normalize(path, body))
    return CassetteSession(Mode.REPLAY, recorded=[Turn(dialect_name, canonical, 200, answer)])


@pytest.mark.parametrize(
    ("path", "said"),
    [
        (G_PATH.replace("proj-a", "proj-b"), "project: recorded proj-a, replayed proj-b"),
        (G_PATH.replace("us-central1", "europe-west4"), "location: recorded us-central1"),
        (G_PATH.replace("gemini-2.5-flash", "gemini-2.5-pro"), "model changed"),
    ],
)
def test_a_changed_project_location_or_model_diverges_naming_it(path: str, said: str) -> None:
    session = _replay_one("vertex-gemini", G_PATH, G_BODY, G_ANSWER)
    assert isinstance(session.on_request(G_PATH, json.dumps(G_BODY).encode()), Rendered)
    session = _replay_one("vertex-gemini", G_PATH, G_BODY, G_ANSWER)
    rendered = session.on_request(path, json.dumps(G_BODY).encode())
    assert isinstance(rendered, Rendered) and rendered.status == 409
    error = json.loads(rendered.body)["error"]
    assert error["status"] == "ABORTED"  # Google's error shape, as Vertex sends
    assert said in error["message"], error["message"]


def test_a_claude_turn_never_answers_the_public_api_or_gemini() -> None:
    session = _replay_one("vertex-anthropic", C_PATH, C_BODY, C_ANSWER)
    public = {**{k: v for k, v in C_BODY.items() if k != "anthropic_version"}}
    rendered = session.on_request("/v1/messages", json.dumps(public).encode())
    assert isinstance(rendered, Rendered) and rendered.status == 409
    assert (
        "protocol changed: recorded vertex-anthropic, replayed anthropic"
        in json.loads(rendered.body)["error"]["message"]
    )


# --- record: the upstream URL, the bearer, the body ----------------------------------------


@pytest.mark.parametrize(
    ("base", "path", "expected"),
    [
        (HOST, G_PATH, f"{HOST}{G_PATH}"),
        (f"{HOST}/v1", G_STREAM, f"{HOST}{G_PATH}"),
        (HOST, f"/v1{C_STREAM}", f"{HOST}{C_PATH}"),  # a proxy base's extra /v1 dropped
        (f"{HOST}/", f"{C_PATH}?key=placeholder&x=1", f"{HOST}{C_PATH}?x=1"),
    ],
)
def test_upstream_url_asks_for_the_plain_answer(base: str, path: str, expected: str) -> None:
    dialect = route(path)
    assert dialect is not None
    assert dialect.upstream_url_for_path(base, path) == expected


@pytest.mark.parametrize(
    ("path", "body", "answer"), [(G_STREAM, G_BODY, G_ANSWER), (C_STREAM, C_BODY, C_ANSWER)]
)
def test_record_forwards_a_bearer_and_the_plain_body(
    path: str, body: dict[str, Any], answer: dict[str, Any]
) -> None:
    session = CassetteSession(Mode.RECORD, upstream=Upstream(HOST, "ya29.token-abc"))
    outcome = session.on_request(path, json.dumps({**body, "stream": True}).encode())
    assert isinstance(outcome, Forward)
    assert outcome.headers == {"authorization": "Bearer ya29.token-abc"}
    assert outcome.default_headers == {}  # no anthropic-version header: it is in the body
    assert ":stream" not in outcome.url and "alt=" not in outcome.url
    sent = json.loads(outcome.body)
    assert not {"model", "project", "location", "stream"} & set(sent)
    canonical = outcome.pending.canonical
    assert canonical["project"] == "proj-a" and "stream" not in canonical
    rendered = session.on_upstream_response(outcome.pending, 200, json.dumps(answer).encode())
    assert rendered.content_type == "text/event-stream"  # the agent asked for a stream
    assert session.recorded[0].protocol == route(path).name  # type: ignore[union-attr]
    assert "ya29.token-abc" not in json.dumps(session.recorded[0].request)


def test_a_bearer_key_is_not_wrapped_twice() -> None:
    assert GEMINI.upstream_auth("Bearer ya29.x") == {"authorization": "Bearer ya29.x"}
    assert CLAUDE.upstream_auth("ya29.x") == {"authorization": "Bearer ya29.x"}


# --- the streams, as the real SDKs read them ------------------------------------------------


def _sdk_transport(rendered: Rendered) -> httpx2.MockTransport:
    def answer(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path.endswith(":streamRawPredict")
        assert request.headers["authorization"] == "Bearer placeholder"
        return httpx2.Response(
            rendered.status, content=rendered.body, headers={"content-type": rendered.content_type}
        )

    return httpx2.MockTransport(answer)


def test_the_claude_stream_reads_back_through_anthropic_vertex() -> None:
    anthropic = pytest.importorskip("anthropic")
    session = _replay_one("vertex-anthropic", C_PATH, C_BODY, C_ANSWER)
    rendered = session.on_request(C_STREAM, json.dumps({**C_BODY, "stream": True}).encode())
    assert isinstance(rendered, Rendered) and rendered.content_type == "text/event-stream"
    client = anthropic.AnthropicVertex(
        region="us-east5",
        project_id="proj-a",
        access_token="placeholder",
        http_client=httpx2.Client(transport=_sdk_transport(rendered)),
    )
    with client.messages.stream(
        model="claude-sonnet-4@20250514", max_tokens=64, messages=C_BODY["messages"]
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "Checking."  # type: ignore[union-attr]
    assert final.content[1].input == {"city": "Nairobi"}  # type: ignore[union-attr]


def test_the_views_read_vertex_answers() -> None:
    streamed = GEMINI.render(GEMINI.normalize(G_STREAM, G_BODY), 200, G_ANSWER, stream=True)
    lines = model_response(GEMINI, {}, streamed.body, 200, streamed.content_type)
    assert "reply: It is sunny in Nairobi today." in lines
    streamed = CLAUDE.render(CLAUDE.normalize(C_STREAM, C_BODY), 200, C_ANSWER, stream=True)
    lines = model_response(CLAUDE, {}, streamed.body, 200, streamed.content_type)
    assert '-> calls get_weather {"city":"Nairobi"}' in lines


@pytest.mark.parametrize(("path", "body"), [(G_STREAM, G_BODY), (C_PATH, C_BODY)])
def test_doctor_answers_vertex_requests(path: str, body: dict[str, Any]) -> None:
    dialect = route(path)
    assert dialect is not None
    rendered = canned_reply(dialect, path, json.dumps(body).encode())
    assert rendered.status == 200


# --- placeholder credentials and injection --------------------------------------------------


def test_placeholder_credentials_load_and_refresh_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """google.auth.default() picks the file, and a refresh (AnthropicVertex refreshes as it
    loads) signs its own token: a request would fail the test, as none can be made."""
    google_auth = pytest.importorskip("google.auth")
    from google.auth.transport import Request as _Request

    class NoNetwork(_Request):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"the placeholder credentials made a request: {args} {kwargs}")

    write_agent_files(str(tmp_path))  # what every flow's private folder gets
    path = file_variables(str(tmp_path))[CREDENTIALS_VARIABLE]
    assert os.stat(path).st_mode & 0o777 == 0o600
    monkeypatch.setenv(CREDENTIALS_VARIABLE, path)
    credentials, project = google_auth.default(
        scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    assert project is None  # the agent names its own project
    assert credentials.universe_domain == PLACEHOLDER_UNIVERSE
    credentials.refresh(NoNetwork())
    assert credentials.token and not credentials.expired


def test_agents_get_the_vertex_base_urls_and_placeholder_credentials() -> None:
    inherited = {"PATH": "/bin", CREDENTIALS_VARIABLE: "/home/dev/real-service-account.json"}
    with task_file("hi") as prompt_file:
        env = agent_environment(
            inherited, port=43210, prompt="hi", spec_env={}, prompt_file=prompt_file
        )
        credentials = env[CREDENTIALS_VARIABLE]
        assert Path(credentials).parent == Path(prompt_file).parent
        assert json.loads(Path(credentials).read_text())["type"] == "service_account"
    assert not Path(credentials).exists()  # removed with the task
    assert env["GOOGLE_VERTEX_BASE_URL"] == "http://127.0.0.1:43210"
    assert env["ANTHROPIC_VERTEX_BASE_URL"] == "http://127.0.0.1:43210/v1"


@pytest.mark.parametrize(
    ("path", "headers", "hinted"),
    [
        ("/", {"x-goog-api-client": "google-genai-sdk/3.6.1 gl-python/3.12.1"}, True),
        ("/?alt=sse", {"user-agent": "google-genai-sdk/2.34.0 gl-python/3.12.1"}, True),
        ("/", {"user-agent": "curl/8.0"}, False),
        ("/v1/other", {"x-goog-api-client": "google-genai-sdk/3.6.1"}, False),
    ],
)
def test_the_gateway_hint_is_for_google_genai_at_the_bare_base_url_only(
    path: str, headers: dict[str, str], hinted: bool
) -> None:
    hint = unknown_path_hint(path, headers)
    assert bool(hint) is hinted
    if hinted:
        assert "genai.Client(vertexai=True, project=..., location=...)" in hint
