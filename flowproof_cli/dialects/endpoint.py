"""The contract of a non-chat endpoint: a call an agent makes around the conversation.

Embeddings, moderation, token counts, model listings and legacy completions are not turns of
the conversation, but an agent that makes them dies without an answer (a retrieval agent
embeds its question before its first chat call). Each is a dialect with `kind = ENDPOINT`:

- recorded and replayed as a turn of its own, stored under its own `protocol` tag, matched
  strictly by its canonical body like a chat turn (with what its path carries folded in by
  `normalize`: Gemini's model, a listing's query);
- its answer is an `EndpointCall` (what was asked, what came back), listed by `show`, the
  trajectory diff and the conversation view, and never read for tool calls or the reply;
- a GET endpoint (`method = "GET"`) has no body: its request as matched is `{}` plus the
  query (`{"query": {"limit": "20"}}`), and record forwards it as a GET without a body.

`Endpoint` fills in the conversation parts an endpoint does not have: no tools, no tool
results to mock, nothing streamed. A subclass names its route, its provider, the request
fields that hold what it asks (`input_fields`, shown as the outline's entries so a changed
input is the first thing a divergence names) and how it describes and cans its answer.
An endpoint whose request is a conversation (Anthropic's `count_tokens`, Gemini's
`countTokens`) subclasses its chat dialect instead, sets `kind = ENDPOINT`, and so keeps
that dialect's outline and mock substitution.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

from flowproof_cli.dialects.base import (
    ENDPOINT,
    JSON,
    Dialect,
    MessageOutline,
    MockLookup,
    without_transport,
)
from flowproof_cli.trajectory import AssistantTurn


def query_of(path: str) -> dict[str, str]:
    """A path's query as a mapping (the last of a repeated name), for a GET's request."""
    _, _, query = path.partition("?")
    return dict(parse_qsl(query, keep_blank_values=True))


def count(value: Any, noun: str) -> str:
    """`1 vector`, `3 vectors`."""
    number = len(value) if isinstance(value, list) else 0
    return f"{number} {noun}{'' if number == 1 else 's'}"


class Endpoint(Dialect):
    """A dialect without a conversation: what it asks is in `input_fields`."""

    kind = ENDPOINT
    streams = False
    #: Request fields holding what is asked (the input to embed, the prompt to complete).
    input_fields: tuple[str, ...] = ("input",)
    #: Query parameters never part of the request as matched (a placeholder key).
    dropped_query: frozenset[str] = frozenset({"key"})

    #: The first of `input_fields` (what the base contract's mock and read steps walk).
    conversation_key = "input"

    def normalize(self, path: str, body: JSON) -> JSON:
        """A GET's request is its query (`{}` without one); a POST's is its body."""
        if self.method != "GET":
            return body
        query = {k: v for k, v in query_of(path).items() if k not in self.dropped_query}
        return {"query": query} if query else {}

    def canonical_request(self, body: JSON) -> JSON:
        return without_transport(body)

    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        return iter(())

    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        return entry

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        """An endpoint's answer is never a conversation turn: no text, no tool calls."""
        return AssistantTurn(turn=turn, text=None, tool_calls=())

    def _tools_in(self, request: JSON) -> Iterator[tuple[str, Any]]:
        return iter(())

    def _messages_in(self, request: JSON) -> Iterator[MessageOutline]:
        for name in self.input_fields:
            if name in request:
                yield MessageOutline(role=name, content=request[name], raw=request[name])

    @property
    def _outline_fields(self) -> frozenset[str]:
        return frozenset({"model", *self.input_fields})

    def _read_request(self, request: JSON) -> None:
        self.outline(request)
        self.describe_request(request)

    def stream_events(self, request: JSON, response: JSON) -> str:
        raise ValueError(f"{self.name} answers are not streamed")

    def wants_stream(self, body: JSON) -> bool:
        return self.streams and bool(body.get("stream"))
