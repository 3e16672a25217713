"""Azure OpenAI: which requests are Azure's (path or `api-key`, never a guess), the deployment
matched, the upstream URL and header, and the rest of flowproof reading its turns."""

from __future__ import annotations

import json

import pytest

from flowproof_addons.canned import canned_reply
from flowproof_cli.cassette import CassetteSession, Forward, Upstream
from flowproof_cli.dialects import dialect_named, route
from flowproof_cli.dialects.azure import azure_path
from flowproof_cli.mode import Mode

CHAT = "/openai/deployments/weather-gpt/chat/completions?api-version=2024-10-21"
BODY = {"model": "weather-gpt", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("path", "headers", "expected"),
    [
        (CHAT, {}, "azure-chat"),
        (CHAT, {"authorization": "Bearer entra-token"}, "azure-chat"),  # the path says Azure
        ("/v1/deployments/d/chat/completions?api-version=x", {}, "azure-chat"),  # Node client
        ("/openai/deployments/d/responses?api-version=x", {}, "azure-responses"),
        ("/openai/responses?api-version=x", {"api-key": "k"}, "azure-responses"),
        ("/openai/v1/chat/completions", {"api-key": "k"}, "azure-chat"),
        ("/openai/v1/responses", {"api-key": "k"}, "azure-responses"),
        # Groq and other OpenAI-compatible services share /openai/v1 and send Bearer.
        ("/openai/v1/chat/completions", {"authorization": "Bearer gsk"}, "openai-chat"),
        ("/v1/chat/completions", {"authorization": "Bearer sk"}, "openai-chat"),
        ("/v1/chat/completions", None, "openai-chat"),
        ("/v1/responses", None, "openai-responses"),
        ("/v1/messages", {"api-key": "k"}, "anthropic"),  # api-key alone claims no other API
    ],
)
def test_routing(path: str, headers: dict[str, str] | None, expected: str) -> None:
    dialect = route(path, headers)
    assert dialect is not None and dialect.name == expected


def test_every_azure_dialect_names_azure() -> None:
    assert dialect_named("azure-chat").provider == "azure"
    assert dialect_named("azure-responses").provider == "azure"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (CHAT, CHAT),
        (
            "/v1/deployments/d/chat/completions?api-version=x",
            "/openai/deployments/d/chat/completions?api-version=x",
        ),
        (
            "/v1/responses?api-version=2025-03-01-preview",
            "/openai/responses?api-version=2025-03-01-preview",
        ),
        ("/openai/v1/chat/completions", "/openai/v1/chat/completions"),
        ("/v1/chat/completions", "/openai/v1/chat/completions"),
    ],
)
def test_the_agents_azure_path_is_kept(path: str, expected: str) -> None:
    assert azure_path(path) == expected


@pytest.mark.parametrize(
    "base",
    [
        "https://res.openai.azure.com",
        "https://res.openai.azure.com/",
        "https://res.openai.azure.com/openai",
        "https://res.openai.azure.com/openai/v1/",
    ],
)
def test_record_forwards_to_the_azure_upstream_with_api_key(base: str) -> None:
    session = CassetteSession(Mode.RECORD, upstream=Upstream(base, "Bearer azure-key-123"))
    dialect = route(CHAT, {"api-key": "placeholder"})
    forward = session.on_request(CHAT, json.dumps(BODY).encode(), dialect)
    assert isinstance(forward, Forward)
    assert forward.url == f"https://res.openai.azure.com{CHAT}"
    assert forward.headers == {"api-key": "azure-key-123"}  # never Bearer
    assert json.loads(forward.body) == BODY  # the deployment is in the URL, not the body
    assert forward.pending.canonical["deployment"] == "weather-gpt"


def test_the_deployment_is_matched() -> None:
    dialect = dialect_named("azure-chat")
    one = dialect.canonical_request(dialect.normalize(CHAT, BODY))
    other = dialect.canonical_request(dialect.normalize(CHAT.replace("weather-gpt", "gpt-b"), BODY))
    assert one["deployment"] == "weather-gpt"
    assert one != other
    assert dialect.outline(other).parameters["deployment"] == "gpt-b"


def test_a_streamed_azure_answer_reads_back_in_the_conversation_view() -> None:
    dialect = dialect_named("azure-chat")
    request = dialect.normalize(CHAT, {**BODY, "stream": True})
    answer = canned_reply(dialect, CHAT, json.dumps({**BODY, "stream": True}).encode())
    assert answer.content_type == "text/event-stream"
    response, how = dialect.answer_from_body(answer.body, answer.content_type)
    assert how.startswith(", reassembled from ") and not how.startswith(", reassembled from 1 ")
    assert dialect.assistant_turn(request, response, 1).text == "Hello from flowproof doctor."
