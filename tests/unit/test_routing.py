"""Routing a request path to the dialect that speaks it."""

from __future__ import annotations

import pytest

from flowproof_addons.guard import is_claimed
from flowproof_cli.dialects import DEFAULT_PROTOCOL, dialect_named, route
from flowproof_cli.dialects.openai_chat import OpenAIChat


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/chat/completions",
        "/v1/v1/chat/completions",
        "/v1/chat/completions?api-version=2024-01-01",
        "/chat/completions?x=1&y=2",
        "/v1/chat/completions/",
        "/chat/completions/",
        "/v1/chat/completions/?api-version=1",
        "/openai/deployments/gpt/chat/completions",
    ],
)
def test_chat_completion_paths_route_to_openai_chat(path: str) -> None:
    dialect = route(path)
    assert isinstance(dialect, OpenAIChat)
    assert is_claimed(path) is True


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat",
        "/",
        "",
        "/v1/chat/completionsx",
        "/v1/chat/completions/extra",
        "/v1/models/gpt-4o",
        "/v1/audio/speech",
        "/v1/embeddingsx",
        "/v1/messages/count_tokens/x",
    ],
)
def test_other_paths_route_nowhere(path: str) -> None:
    assert route(path) is None
    assert is_claimed(path) is False


def test_dialect_named() -> None:
    assert isinstance(dialect_named("openai-chat"), OpenAIChat)
    assert DEFAULT_PROTOCOL == "openai-chat" == OpenAIChat.name
    with pytest.raises(KeyError) as info:
        dialect_named("klingon")
    message = info.value.args[0]
    assert message.startswith("unknown protocol 'klingon' (known: ")
    assert "openai-chat" in message


def test_a_request_is_routed_once_as_the_agent_sent_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard and the model boundary share one routing of each request (`routed`), kept
    in flow.metadata: a later rewrite of the path (record's forward) changes nothing."""
    from mitmproxy.test import tflow

    from flowproof_addons import guard

    calls: list[str] = []

    def counted(path: str, *args: object) -> object:
        calls.append(path)
        return route(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(guard, "route", counted)
    flow = tflow.tflow()
    flow.request.path = "/v1/chat/completions"
    assert guard.routed(flow) is dialect_named(DEFAULT_PROTOCOL)
    flow.request.path = "/upstream/elsewhere"
    assert guard.routed(flow) is dialect_named(DEFAULT_PROTOCOL)
    assert calls == ["/v1/chat/completions"]
    other = tflow.tflow()
    other.request.method = "CONNECT"
    assert guard.routed(other) is None and calls == ["/v1/chat/completions"]
