"""Gemini's endpoints around generateContent: embeddings, token counts, the model list.

Methods on a model resource like generateContent, so the model is in the path
(`/v1beta/models/gemini-embedding-001:batchEmbedContents`) and folded into the request as
`model`, which makes it part of matching. `:embedContent` embeds one `content`,
`:batchEmbedContents` a list of `requests` (what google-genai's `embed_content` sends),
`:countTokens` counts a generateContent request's `contents` (the Gemini dialect as an
endpoint: its conversation outlined and its function responses mocked the same way), and
`GET .../models` with Google's key header lists the models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from flowproof_cli.dialects.base import ENDPOINT, JSON, Dialect, bare_key, without_transport
from flowproof_cli.dialects.endpoint import Endpoint, count, query_of
from flowproof_cli.dialects.gemini import GeminiGenerateContent
from flowproof_cli.dialects.openai_endpoints import model_ids, vectors

#: The generateContent dialect, whose path, key and error handling every Gemini call shares.
_GEMINI = GeminiGenerateContent()


class _GeminiEndpoint(Endpoint):
    """What a Gemini method on a model shares: the model from the path, Google's key header,
    the upstream path kept from its version segment on, Google's error shape."""

    provider = "gemini"
    auth_headers = ("x-goog-api-key", "authorization")

    def normalize(self, path: str, body: JSON) -> JSON:
        if self.method == "GET":
            return super().normalize(path, body)
        return _GEMINI.normalize(path, body)

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        return _GEMINI.upstream_url_for_path(base_url, path)

    def upstream_auth(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": bare_key(key)}

    def upstream_body(self, body: JSON) -> JSON | None:
        """The model travels in the URL; a GET has no body."""
        if self.method == "GET":
            return None
        return {k: v for k, v in without_transport(body).items() if k != "model"}

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return _GEMINI.error_body(message, kind, status)


class GeminiEmbedContent(_GeminiEndpoint):
    """`:embedContent`: one `content` to one vector."""

    name = "gemini-embed-content"
    route_suffixes = (":embedContent",)
    input_fields = ("content",)
    conversation_key = "content"
    example_request: ClassVar[JSON] = {
        "model": "gemini-embedding-001",
        "content": {"parts": [{"text": "What is the refund policy?"}]},
    }

    def describe_answer(self, response: JSON) -> str:
        return vectors([response.get("embedding")], "values")

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {"embedding": {"values": [0.0] * 8}}


class GeminiBatchEmbedContents(_GeminiEndpoint):
    """`:batchEmbedContents`: `requests` (each a model and a content) to vectors."""

    name = "gemini-batch-embed-contents"
    route_suffixes = (":batchEmbedContents",)
    input_fields = ("requests",)
    conversation_key = "requests"
    example_request: ClassVar[JSON] = {
        "model": "gemini-embedding-001",
        "requests": [
            {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": "What is the refund policy?"}]},
            }
        ],
    }

    def describe_answer(self, response: JSON) -> str:
        return vectors(response.get("embeddings"), "values")

    def canned_response(self, request: JSON, text: str) -> JSON:
        requests = request.get("requests")
        number = len(requests) if isinstance(requests, list) and requests else 1
        return {"embeddings": [{"values": [0.0] * 8} for _ in range(number)]}


class GeminiModels(_GeminiEndpoint):
    """`GET .../models` with Google's key (header or `key=`): the model list."""

    name = "gemini-models"
    method = "GET"
    route_suffixes = ("models",)
    input_fields = ("query",)
    conversation_key = "query"
    example_request: ClassVar[JSON] = {}

    def claims(self, path: str, headers: Mapping[str, str]) -> bool | None:
        """Gemini's when the client sent Google's key, in its header or the query."""
        return "x-goog-api-key" in headers or "key" in query_of(path) or None

    def describe_request(self, request: JSON) -> str:
        query = request.get("query")
        return f"list models {query}" if query else "list models"

    def describe_answer(self, response: JSON) -> str:
        return model_ids(response.get("models"), "name")

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {"models": [{"name": "models/flowproof-doctor", "displayName": "flowproof doctor"}]}


class GeminiCountTokens(GeminiGenerateContent):
    """`:countTokens`: a generateContent request's `contents` (or a whole
    `generateContentRequest`), counted."""

    name = "gemini-count-tokens"
    plain_request = Dialect.plain_request  # an endpoint: refused
    kind = ENDPOINT
    streams = False
    route_suffixes = (":countTokens",)
    example_request: ClassVar[JSON] = {
        "model": "gemini-2.5-flash",
        "contents": [{"role": "user", "parts": [{"text": "Say hello."}]}],
    }

    def describe_request(self, request: JSON) -> str:
        outline = self.outline(request)
        inner = request.get("generateContentRequest")
        if isinstance(inner, dict):
            outline = self.outline(inner)
        contents, tools = (
            count(list(outline.messages), "content"),
            count(list(outline.tools), "tool"),
        )
        return f"count {contents}, {tools}"

    def describe_answer(self, response: JSON) -> str:
        return f"{response.get('totalTokens')} tokens"

    def wants_stream(self, body: JSON) -> bool:
        return False

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {"totalTokens": 1}

    def answer_from_body(self, data: bytes, content_type: str | None) -> tuple[Any, str]:
        return Dialect.answer_from_body(self, data, content_type)
