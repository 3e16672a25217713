"""Endpoints around the conversation as turns of their own (dialects/endpoint.py).

Recorded and replayed like chat turns, matched strictly (a changed input is a divergence
that names it), forwarded to the right URL with the key in the provider's header, listed by
`show` and the trajectory diff, and never read as tool calls or the reply.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.cassette.session import served_trajectory
from flowproof_cli.dialects import Rendered, dialect_named, route
from flowproof_cli.evidence.timeline import timeline
from flowproof_cli.evidence.trajectory_diff import diff_traces
from flowproof_cli.match.rules import MatchRules
from flowproof_cli.trace import Trace
from flowproof_cli.trajectory import EndpointCall
from tests.unit.trace_builders import chat_completion

EMBED = {"model": "text-embedding-3-small", "input": ["refund policy?"], "encoding_format": "float"}
VECTORS = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 3, "total_tokens": 3},
}
CHAT_REQUEST = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Refunds?"}]}
CHAT_REPLY = chat_completion("Within 30 days.")


def rag_turns() -> list[Turn]:
    """A retrieval agent: it embeds the question, then asks the model."""
    return [
        Turn("openai-embeddings", EMBED, 200, VECTORS),
        Turn("openai-chat", CHAT_REQUEST, 200, CHAT_REPLY),
    ]


def body_of(rendered: Rendered | Forward) -> Any:
    assert isinstance(rendered, Rendered)
    return json.loads(rendered.body)


# -- replay ------------------------------------------------------------------------------------


def test_an_embedding_call_replays_as_a_turn_of_its_own() -> None:
    session = CassetteSession(Mode.REPLAY, recorded=rag_turns())
    assert body_of(session.on_request("/v1/embeddings", json.dumps(EMBED).encode())) == VECTORS
    chat = session.on_request("/v1/chat/completions", json.dumps(CHAT_REQUEST).encode())
    assert body_of(chat)["choices"][0]["message"]["content"] == "Within 30 days."
    assert session.errors == [] and session.divergence is None
    trajectory = session.trajectory()
    assert trajectory.reply == "Within 30 days."  # the embedding call is not the reply
    assert trajectory.tool_calls == []
    assert trajectory.endpoint_calls == [
        EndpointCall(
            1,
            "openai-embeddings",
            "text-embedding-3-small",
            'input: ["refund policy?"]',
            "1 vector of 3",
        )
    ]


def test_embeddings_alone_are_never_the_reply() -> None:
    """Three embedding calls and one chat turn: the chat turn's text is the reply (as a
    group of turns, three endpoint calls would have outnumbered it)."""
    turns = [
        Turn("openai-embeddings", {**EMBED, "input": [f"q{n}"]}, 200, VECTORS) for n in range(3)
    ]
    trajectory = served_trajectory([*turns, rag_turns()[1]], [0, 1, 2, 3], MatchRules())
    assert trajectory.reply == "Within 30 days."
    assert len(trajectory.endpoint_calls) == 3
    only = served_trajectory(turns, [0, 1, 2], MatchRules())
    assert only.reply is None and only.turns == []


def test_a_changed_embedding_input_is_a_divergence_naming_it() -> None:
    session = CassetteSession(Mode.REPLAY, recorded=rag_turns())
    changed = {**EMBED, "input": ["cancellation policy?"]}
    answer = session.on_request("/v1/embeddings", json.dumps(changed).encode())
    assert isinstance(answer, Rendered) and answer.status == 409
    assert session.divergence is not None
    assert session.divergence.message == (
        "turn 1: the openai-embeddings `input` content changed\n"
        "  content.0: recorded refund policy?, replayed cancellation policy?"
    )


def test_the_path_model_of_a_gemini_embedding_is_matched() -> None:
    request = {
        "requests": [
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "q"}]}}
        ]
    }
    recorded = dialect_named("gemini-batch-embed-contents").normalize(
        "/v1beta/models/gemini-embedding-001:batchEmbedContents", request
    )
    answer = {"embeddings": [{"values": [0.5, 0.25]}]}
    session = CassetteSession(
        Mode.REPLAY, recorded=[Turn("gemini-batch-embed-contents", recorded, 200, answer)]
    )
    other = session.on_request(
        "/v1beta/models/text-embedding-004:batchEmbedContents", json.dumps(request).encode()
    )
    assert isinstance(other, Rendered) and other.status == 409
    assert session.divergence is not None and "model" in session.divergence.summary
    again = CassetteSession(
        Mode.REPLAY, recorded=[Turn("gemini-batch-embed-contents", recorded, 200, answer)]
    )
    same = again.on_request(
        "/v1beta/models/gemini-embedding-001:batchEmbedContents?key=x", json.dumps(request).encode()
    )
    assert body_of(same) == answer


def test_a_listing_is_a_get_matched_by_its_query() -> None:
    listing = {"data": [{"type": "model", "id": "claude-sonnet-4-5"}], "has_more": False}
    recorded = [Turn("anthropic-models", {"query": {"limit": "20"}}, 200, listing)]
    session = CassetteSession(Mode.REPLAY, recorded=recorded)
    dialect = route("/v1/models?limit=20", {"x-api-key": "k"}, "GET")
    assert dialect is not None and dialect.name == "anthropic-models"
    assert body_of(session.on_request("/v1/models?limit=20", b"", dialect)) == listing
    again = CassetteSession(Mode.REPLAY, recorded=recorded)
    assert isinstance(answer := again.on_request("/v1/models?limit=5", b"", dialect), Rendered)
    assert answer.status == 409


# -- record ------------------------------------------------------------------------------------


def test_record_forwards_each_endpoint_with_the_providers_key_header() -> None:
    upstream = Upstream("https://upstream.example/v1", "sk-secret")
    cases = [
        ("/v1/embeddings", None, "POST", "https://upstream.example/v1/embeddings", "authorization"),
        (
            "/v1/messages/count_tokens?beta=true",
            None,
            "POST",
            "https://upstream.example/v1/messages/count_tokens?beta=true",
            "x-api-key",
        ),
        (
            "/v1/models?limit=20",
            {"anthropic-version": "2023-06-01"},
            "GET",
            "https://upstream.example/v1/models?limit=20",
            "x-api-key",
        ),
        (
            "/v1beta/models/gemini-embedding-001:batchEmbedContents?key=placeholder",
            None,
            "POST",
            "https://upstream.example/v1beta/models/gemini-embedding-001:batchEmbedContents",
            "x-goog-api-key",
        ),
    ]
    for path, headers, method, url, header in cases:
        dialect = route(path, headers, method)
        assert dialect is not None, path
        session = CassetteSession(Mode.RECORD, upstream=upstream)
        body = b"" if method == "GET" else json.dumps(dialect.example_request).encode()
        forward = session.on_request(path, body, dialect)
        assert isinstance(forward, Forward), path
        assert forward.url == url
        assert list(forward.headers) == [header]
        assert "sk-secret" in forward.headers[header]
        assert (forward.body == b"") == (method == "GET")
        if dialect.provider == "gemini":
            assert "model" not in json.loads(forward.body)  # it travels in the URL


def test_record_keeps_an_endpoint_answer_and_the_trace_replays_it() -> None:
    upstream = Upstream("https://upstream.example/v1", "sk-secret")
    session = CassetteSession(Mode.RECORD, upstream=upstream)
    forward = session.on_request("/v1/embeddings", json.dumps(EMBED).encode())
    assert isinstance(forward, Forward)
    answer = session.on_upstream_response(forward.pending, 200, json.dumps(VECTORS).encode())
    assert json.loads(answer.body) == VECTORS and session.errors == []
    assert session.recorded == [Turn("openai-embeddings", EMBED, 200, VECTORS)]
    assert session.trajectory().endpoint_calls[0].answered == "1 vector of 3"


def test_an_upstream_error_on_an_endpoint_reaches_the_agent_and_fails_the_record() -> None:
    session = CassetteSession(Mode.RECORD, upstream=Upstream("https://u.example/v1", "k"))
    forward = session.on_request("/v1/embeddings", json.dumps(EMBED).encode())
    assert isinstance(forward, Forward)
    error = {"error": {"message": "model not found", "type": "invalid_request_error"}}
    answer = session.on_upstream_response(forward.pending, 404, json.dumps(error).encode())
    assert answer.status == 404 and json.loads(answer.body) == error
    assert session.errors == [
        "flowproof: the upstream model answered turn 1 with HTTP 404: model not found"
    ]


# -- describing base64 vectors and streamed completions ---------------------------------------


def test_base64_embeddings_are_counted_by_their_floats() -> None:
    packed = base64.b64encode(struct.pack("<4f", 0.1, 0.2, 0.3, 0.4)).decode()
    dialect = dialect_named("openai-embeddings")
    response = {"data": [{"embedding": packed}, {"embedding": packed}]}
    assert dialect.describe_answer(response) == "2 vectors of 4"


def test_a_streamed_legacy_completion_is_synthesized_and_reads_back() -> None:
    dialect = dialect_named("openai-completions")
    request = {
        "model": "gpt-3.5-turbo-instruct",
        "prompt": "Say",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = dialect.canned_response(request, "hello there, a longer completion text " * 3)
    rendered = dialect.render(request, 200, response, stream=True)
    assert rendered.content_type == "text/event-stream"
    assert rendered.body.endswith(b"data: [DONE]\n\n")
    back, how = dialect.answer_from_body(rendered.body, rendered.content_type)
    assert back["choices"][0]["text"] == response["choices"][0]["text"]
    assert back["usage"] == response["usage"] and "SSE events" in how


# -- show and the trajectory diff -------------------------------------------------------------


def test_show_lists_endpoint_calls_apart_from_the_conversation() -> None:
    lines = timeline(Trace(flow="rag", turns=rag_turns()), "rag.trace.yaml")
    assert lines[1:] == [
        "turn 1: openai-embeddings (endpoint), model text-embedding-3-small",
        '  asked: input: ["refund policy?"]',
        "  <- 1 vector of 3",
        "turn 2: openai-chat, model gpt-4o-mini, no tools",
        "  user: Refunds?",
        "  reply: Within 30 days.",
    ]


def test_the_trajectory_diff_lists_endpoint_calls_and_their_changed_input() -> None:
    old = Trace(flow="rag", turns=rag_turns())
    changed = Turn("openai-embeddings", {**EMBED, "input": ["cancellation?"]}, 200, VECTORS)
    extra = Turn(
        "openai-moderations", {"input": "Refunds?"}, 200, {"results": [{"flagged": False}]}
    )
    new = Trace(flow="rag", turns=[changed, extra, rag_turns()[1]])
    lines = diff_traces(old, new).lines()
    assert "  endpoint calls: openai-embeddings -> openai-embeddings, openai-moderations" in lines
    assert "    + openai-moderations: call 2, new" in lines
    assert any("cancellation?" in line for line in lines)
    assert not any(line.strip().startswith("reply:") for line in lines)  # the reply held


@pytest.mark.parametrize(
    ("path", "headers", "method", "name"),
    [
        ("/v1/embeddings", None, "POST", "openai-embeddings"),
        ("/v1/moderations", None, "POST", "openai-moderations"),
        ("/v1/models", {"authorization": "Bearer x"}, "GET", "openai-models"),
        ("/v1/models", {"x-api-key": "x"}, "GET", "anthropic-models"),
        ("/v1/models", {"anthropic-version": "2023-06-01"}, "GET", "anthropic-models"),
        ("/v1beta/models?pageSize=50", {"x-goog-api-key": "x"}, "GET", "gemini-models"),
        ("/v1beta/models?key=x", None, "GET", "gemini-models"),
        ("/v1/completions", None, "POST", "openai-completions"),
        ("/v1/chat/completions", None, "POST", "openai-chat"),
        ("/v1/messages/count_tokens?beta=true", None, "POST", "anthropic-count-tokens"),
        ("/v1/messages?beta=true", None, "POST", "anthropic"),
        ("/v1beta/models/m:embedContent", None, "POST", "gemini-embed-content"),
        ("/v1beta/models/m:batchEmbedContents", None, "POST", "gemini-batch-embed-contents"),
        ("/v1beta/models/m:countTokens", None, "POST", "gemini-count-tokens"),
        ("/v1/models", None, "POST", None),
        ("/v1/models/gpt-4o", None, "GET", None),
    ],
)
def test_routing_of_endpoints(
    path: str, headers: dict[str, str] | None, method: str, name: str | None
) -> None:
    dialect = route(path, headers, method)
    assert (dialect.name if dialect else None) == name
