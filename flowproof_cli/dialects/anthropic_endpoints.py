"""Anthropic's endpoints around Messages: `count_tokens` and the model list.

`POST /v1/messages/count_tokens` takes a Messages request without `max_tokens` (coding
agents count before they send) and answers `{"input_tokens": N}`: it is the Messages
dialect as an endpoint, so its conversation is outlined and its tool results mocked the
same way. `GET /v1/models` shares its path with OpenAI's listing; a request is Anthropic's
when it carries Anthropic's auth or version header (`x-api-key`, `anthropic-version`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from flowproof_cli.dialects.anthropic import AnthropicMessages
from flowproof_cli.dialects.base import ENDPOINT, JSON, Dialect, bare_key
from flowproof_cli.dialects.endpoint import Endpoint, count
from flowproof_cli.dialects.openai_endpoints import model_ids


def _anthropic_url(base_url: str, rest: str, query: str) -> str:
    """`.../v1` + rest; a base without `/v1` (ANTHROPIC_BASE_URL's convention) gets it."""
    base = base_url.rstrip("/")
    url = f"{base}/{rest}" if base.endswith("/v1") else f"{base}/v1/{rest}"
    return f"{url}?{query}" if query else url


class AnthropicCountTokens(AnthropicMessages):
    """`POST .../messages/count_tokens`: a Messages request's tokens, counted."""

    name = "anthropic-count-tokens"
    plain_request = Dialect.plain_request  # an endpoint: refused
    kind = ENDPOINT
    streams = False
    route_suffixes = ("messages/count_tokens",)
    example_request: ClassVar[JSON] = {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "Say hello."}],
    }

    def describe_request(self, request: JSON) -> str:
        outline = self.outline(request)
        messages, tools = (
            count(list(outline.messages), "message"),
            count(list(outline.tools), "tool"),
        )
        return f"count {messages}, {tools}"

    def describe_answer(self, response: JSON) -> str:
        return f"{response.get('input_tokens')} input tokens"

    def wants_stream(self, body: JSON) -> bool:
        return False

    def upstream_url(self, base_url: str, query: str) -> str:
        return _anthropic_url(base_url, "messages/count_tokens", query)

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {"input_tokens": 1}


class AnthropicModels(Endpoint):
    """`GET .../models` with Anthropic's headers: the model list."""

    name = "anthropic-models"
    provider = "anthropic"
    method = "GET"
    route_suffixes = ("models",)
    auth_headers = ("x-api-key", "authorization")
    input_fields = ("query",)
    conversation_key = "query"
    example_request: ClassVar[JSON] = {}

    def claims(self, path: str, headers: Mapping[str, str]) -> bool | None:
        """Anthropic's when the client sent Anthropic's key or version header."""
        return "x-api-key" in headers or "anthropic-version" in headers or None

    def describe_request(self, request: JSON) -> str:
        query = request.get("query")
        return f"list models {query}" if query else "list models"

    def describe_answer(self, response: JSON) -> str:
        return model_ids(response.get("data"))

    def upstream_url(self, base_url: str, query: str) -> str:
        return _anthropic_url(base_url, "models", query)

    def upstream_auth(self, key: str) -> dict[str, str]:
        return {"x-api-key": bare_key(key)}

    def upstream_default_headers(self) -> dict[str, str]:
        return {"anthropic-version": "2023-06-01"}

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return {"type": "error", "error": {"type": kind, "message": message}}

    def canned_response(self, request: JSON, text: str) -> JSON:
        model = {
            "type": "model",
            "id": "flowproof-doctor",
            "display_name": "flowproof doctor",
            "created_at": "2026-01-01T00:00:00Z",
        }
        return {
            "data": [model],
            "has_more": False,
            "first_id": "flowproof-doctor",
            "last_id": "flowproof-doctor",
        }
