"""Ollama's native calls around the chat: `/api/embed` (and the legacy `/api/embeddings`) and
`/api/generate`.

`/api/embed` takes `input` (a text or a list of texts) and answers `{model, embeddings:
[[float, ...], ...], total_duration, load_duration, prompt_eval_count}`; it is never
streamed. `/api/generate` is the one-prompt completion (`prompt`, `system`, `suffix`,
`images`, `context`): like `/api/chat` it streams NDJSON unless `"stream": false`, each line
a `response` fragment and the last `done` with the counters and `context`. Both are
endpoints: turns of their own, matched strictly by body, never the reply.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from flowproof_cli.dialects.base import JSON, Rendered, without_transport
from flowproof_cli.dialects.endpoint import count
from flowproof_cli.dialects.ollama import (
    NDJSON,
    is_ndjson,
    ndjson_line,
    ndjson_payloads,
    ndjson_render,
    ollama_error_body,
    ollama_upstream_url,
    wants_ndjson_stream,
)
from flowproof_cli.dialects.provider_endpoint import ProviderEndpoint, clipped
from flowproof_cli.dialects.sse import piece_size, split_deltas


class _OllamaEndpoint(ProviderEndpoint):
    provider = "ollama"
    auth_headers = ("authorization",)

    def upstream_url(self, base_url: str, query: str) -> str:
        return ollama_upstream_url(base_url, self.route_suffixes[0], query)

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return ollama_error_body(message, kind, status)


class OllamaEmbed(_OllamaEndpoint):
    """`/api/embed`: one vector per input text."""

    name = "ollama-embed"
    route_suffixes = ("api/embed",)
    input_fields = ("input",)
    conversation_key = "input"
    example_request: ClassVar[JSON] = {"model": "nomic-embed-text", "input": ["Say hello."]}

    def describe_answer(self, response: JSON) -> str:
        vectors = response.get("embeddings")
        first = vectors[0] if isinstance(vectors, list) and vectors else None
        size = f" of {len(first)}" if isinstance(first, list) else ""
        return f"{count(vectors, 'vector')}{size}"

    def canned_response(self, request: JSON, text: str) -> JSON:
        inputs = request.get("input")
        number = len(inputs) if isinstance(inputs, list) else 1
        return {"model": request.get("model"), "embeddings": [[0.0, 0.0, 0.0]] * number}


class OllamaEmbeddings(_OllamaEndpoint):
    """`/api/embeddings`, the legacy call `/api/embed` replaced: one `prompt`, one vector.

    Its own dialect so it is Ollama's, not OpenAI's `.../embeddings` (the longer suffix
    wins the route)."""

    name = "ollama-embeddings"
    route_suffixes = ("api/embeddings",)
    input_fields = ("prompt",)
    conversation_key = "prompt"
    example_request: ClassVar[JSON] = {"model": "nomic-embed-text", "prompt": "Say hello."}

    def describe_answer(self, response: JSON) -> str:
        vector = response.get("embedding")
        return f"1 vector of {len(vector)}" if isinstance(vector, list) else "no vector"

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {"embedding": [0.0, 0.0, 0.0]}


class OllamaGenerate(_OllamaEndpoint):
    """`/api/generate`: a completion of one prompt, streamed as NDJSON by default."""

    name = "ollama-generate"
    route_suffixes = ("api/generate",)
    input_fields = ("prompt", "system", "suffix", "images", "context")
    conversation_key = "prompt"
    streams = True
    stream_media_type = NDJSON
    example_request: ClassVar[JSON] = {"model": "llama3.2", "prompt": "Say hello."}

    def wants_stream(self, body: JSON) -> bool:
        return wants_ndjson_stream(body)

    def describe_answer(self, response: JSON) -> str:
        return f"response: {clipped(str(response.get('response') or ''))}"

    def render(self, request: JSON, status: int, response: JSON, *, stream: bool) -> Rendered:
        return ndjson_render(self, request, status, response, stream=stream)

    def stream_events(self, request: JSON, response: JSON) -> str:
        """The thinking, then the response, in fragments; a last `done` line with the rest
        (counters, `context`, `done_reason`)."""
        head = {key: response[key] for key in ("model", "created_at") if key in response}
        size = piece_size(response)
        lines = [
            ndjson_line({**head, "response": "", "thinking": fragment, "done": False})
            for fragment in split_deltas(str(response.get("thinking") or ""), size)
        ]
        lines += [
            ndjson_line({**head, "response": fragment, "done": False})
            for fragment in split_deltas(str(response.get("response") or ""), size)
        ]
        rest = {k: v for k, v in response.items() if k not in ("model", "created_at", "response")}
        rest.pop("thinking", None)
        lines.append(ndjson_line({**head, "response": "", **rest, "done": True}))
        return "".join(lines)

    def answer_from_body(self, data: bytes, content_type: str | None) -> tuple[Any, str]:
        if not is_ndjson(data, content_type):
            return json.loads(data), ""
        lines = [line for line in ndjson_payloads(data) if isinstance(line, dict)]
        if not lines:
            raise ValueError("an NDJSON stream without one JSON object line")
        whole = {**lines[-1], "response": "".join(str(x.get("response") or "") for x in lines)}
        thinking = "".join(str(x.get("thinking") or "") for x in lines)
        if thinking:
            whole["thinking"] = thinking
        return whole, f", reassembled from {len(lines)} NDJSON lines"

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {"model": request.get("model"), "response": text, "done": True}

    def upstream_body(self, body: JSON) -> JSON:
        return {**without_transport(body), "stream": False}
