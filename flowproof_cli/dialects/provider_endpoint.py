"""The non-chat endpoints of Ollama and Cohere (embeddings, rerank, generate) on one base.

An endpoint is a call an agent makes around the conversation: recorded and replayed as a
turn of its own under its own protocol tag, matched strictly by its canonical body, its
answer listed beside the conversation and never read for tool calls or the reply
(`kind = "endpoint"`, the endpoint contract of docs/architecture.md). `ProviderEndpoint`
fills in the conversation parts such a call does not have: no tools, no tool results to
mock. A subclass names its route, its provider, the request fields that hold what it asks
(`input_fields`: the outline's entries, so a changed input is the first thing a divergence
names) and how it describes its answer in one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from flowproof_cli.dialects.base import JSON, Dialect, MessageOutline, MockLookup, text_of
from flowproof_cli.trajectory import AssistantTurn

#: `Dialect.kind` of a call around the conversation.
ENDPOINT = "endpoint"
#: The most characters of an input a one-line description shows.
_SHOWN = 80


def count(value: Any, noun: str) -> str:
    """`1 vector`, `3 vectors`."""
    number = len(value) if isinstance(value, list) else 0
    return f"{number} {noun}{'' if number == 1 else 's'}"


def clipped(text: str, limit: int = _SHOWN) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _text(content: Any) -> str:
    """A string, a list of strings joined, or the text of content parts."""
    if isinstance(content, list) and all(isinstance(item, str) for item in content):
        return " | ".join(content)
    return text_of(content, " | ") if isinstance(content, list | str) else ""


class ProviderEndpoint(Dialect):
    """A dialect without a conversation: what it asks is in `input_fields`."""

    kind = ENDPOINT
    streams = False
    #: Request fields holding what is asked (the texts to embed, the query to rank by).
    input_fields: tuple[str, ...] = ("input",)

    @property
    def conversation_key(self) -> str:  # type: ignore[override]
        return self.input_fields[0]

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

    def describe_request(self, request: JSON) -> str:
        """What the call asks, in one line: each input field's text."""
        shown = []
        for message in self.outline(request).messages:
            text = _text(message.content) or json.dumps(message.content, ensure_ascii=False)
            shown.append(f"{message.role}: {clipped(text)}")
        return "; ".join(shown) or "(nothing asked)"

    def describe_answer(self, response: JSON) -> str:
        """What came back, in one line (each endpoint says it its own way)."""
        raise NotImplementedError(f"{self.name} does not describe its answers")

    def wants_stream(self, body: JSON) -> bool:
        return False

    def stream_events(self, request: JSON, response: JSON) -> str:
        raise ValueError(f"{self.name} answers are not streamed")
