"""The base of Ollama's and Cohere's endpoints: the endpoint contract (`dialects/endpoint.py`)
with a one-line description of their inputs, which are mostly lists of plain strings (texts
to embed, documents to rank) the base would show as JSON."""

from __future__ import annotations

import json
from typing import Any

from flowproof_cli.dialects.base import JSON, text_of
from flowproof_cli.dialects.endpoint import Endpoint

#: The most characters of an input a one-line description shows.
_SHOWN = 80


def clipped(text: str, limit: int = _SHOWN) -> str:
    """One line of at most `limit` characters (whitespace runs folded)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _text(content: Any) -> str:
    """A string, a list of strings joined, or the text of content parts."""
    if isinstance(content, list) and all(isinstance(item, str) for item in content):
        return " | ".join(content)
    return text_of(content, " | ") if isinstance(content, list | str) else ""


class ProviderEndpoint(Endpoint):
    """An endpoint whose inputs read as text: `input: a question | a note`."""

    def describe_request(self, request: JSON) -> str:
        shown = []
        for message in self.outline(request).messages:
            text = _text(message.content) or json.dumps(message.content, ensure_ascii=False)
            shown.append(f"{message.role}: {clipped(text)}")
        return "; ".join(shown) or "(nothing asked)"
