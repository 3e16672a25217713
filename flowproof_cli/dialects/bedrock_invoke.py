"""Amazon Bedrock InvokeModel (`/model/<modelId>/invoke`) and InvokeModelWithResponseStream
(`/model/<modelId>/invoke-with-response-stream`).

The body is the model's own: an Anthropic Messages body with `anthropic_version:
bedrock-2023-05-31` (the model in the path, not the body), or an embedding model's
(Titan's `inputText`, Cohere's `texts`). A Messages body reads as Anthropic Messages
(tool calls, mocks, outline); any other body is a call of its own, matched strictly on the
whole body and the model, and contributes no text and no tool call to the trajectory.

The stream wraps each Anthropic event, as JSON, base64-encoded, in an event-stream `chunk`
frame (`{"bytes": "..."}`); the last (`message_stop`) carries
`amazon-bedrock-invocationMetrics`. Record forwards the plain InvokeModel and synthesizes
the stream from its answer, as for Converse.
"""

from __future__ import annotations

import base64
import json
from typing import Any, ClassVar

from flowproof_cli.canonical import compact_json
from flowproof_cli.dialects import eventstream
from flowproof_cli.dialects.anthropic import AnthropicMessages
from flowproof_cli.dialects.base import JSON, Dialect, Rendered, RequestOutline, without_transport
from flowproof_cli.dialects.bedrock import (
    MODEL_FIELD,
    answer_or_frames,
    bearer,
    bedrock_error,
    fold_path,
    upstream_path,
)
from flowproof_cli.dialects.endpoint import count
from flowproof_cli.trajectory import AssistantTurn, EndpointCall

#: The Anthropic `anthropic_version` Bedrock accepts.
ANTHROPIC_VERSION = "bedrock-2023-05-31"


def is_messages_body(request: JSON) -> bool:
    """Whether an invoke body is an Anthropic Messages call (else: an embedding or another
    model's native call)."""
    return "messages" in request or str(request.get("anthropic_version", "")).startswith("bedrock-")


class BedrockInvoke(AnthropicMessages):
    """InvokeModel with Anthropic Messages bodies (and other models' bodies, whole)."""

    name = "bedrock-invoke"
    provider = "bedrock"
    route_suffixes = ("invoke", "invoke-with-response-stream")  # type: ignore[assignment]
    auth_headers = ("authorization", "x-amz-security-token")
    plain_request = Dialect.plain_request  # signed requests: refused
    stream_media_type = eventstream.CONTENT_TYPE
    example_request: ClassVar[JSON] = {
        "anthropic_version": ANTHROPIC_VERSION,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    _STREAMING: ClassVar[dict[str, str]] = {"invoke-with-response-stream": "invoke"}

    def normalize(self, path: str, body: JSON) -> JSON:
        return fold_path(path, body, self._STREAMING)

    # --- trajectory -------------------------------------------------------------------------

    def read_answer(self, request: JSON, response: JSON, turn: int) -> AssistantTurn | EndpointCall:
        """A Messages call is a turn of the conversation; any other body (an embedding) is a
        call beside it (`EndpointCall`), never read for tool calls or the reply."""
        if is_messages_body(request):
            return self.assistant_turn(request, response, turn)
        return EndpointCall(
            turn=turn,
            protocol=self.name,
            model=request.get(MODEL_FIELD),
            asked=self.describe_request(request),
            answered=self.describe_answer(response),
        )

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        """A Messages call as Anthropic's; any other body says nothing and calls nothing."""
        if is_messages_body(request) or "content" in response:
            return super().assistant_turn(request, response, turn)
        return AssistantTurn(turn=turn, text=None, tool_calls=())

    def describe_request(self, request: JSON) -> str:
        """What an embedding call asks: Titan's `inputText`, Cohere's `texts`, else the
        body."""
        if "inputText" in request:
            return f"input: {request['inputText']}"
        if isinstance(request.get("texts"), list):
            return "texts: " + "; ".join(str(text) for text in request["texts"])
        body = {k: v for k, v in request.items() if k != MODEL_FIELD}
        return compact_json(body)

    def describe_answer(self, response: JSON) -> str:
        """`1 vector of 1024` (Titan), `3 vectors of 1024` (Cohere), else the answer's
        fields."""
        vectors = response.get("embeddings")
        if isinstance(response.get("embedding"), list):
            vectors = [response["embedding"]]
        if isinstance(vectors, dict):  # Cohere's embeddings by type
            vectors = next(iter(vectors.values()), [])
        if isinstance(vectors, list):
            size = len(vectors[0]) if vectors and isinstance(vectors[0], list) else 0
            return f"{count(vectors, 'vector')} of {size}"
        return "an answer with " + (", ".join(sorted(response)) or "no fields")

    # --- divergence -------------------------------------------------------------------------

    def outline(self, request: JSON) -> RequestOutline:
        outline = super().outline(request)
        parameters = {k: v for k, v in outline.parameters.items() if k != MODEL_FIELD}
        return RequestOutline(
            model=request.get(MODEL_FIELD, request.get("model")),
            tools=outline.tools,
            messages=outline.messages,
            parameters=parameters,
        )

    # --- rendering --------------------------------------------------------------------------

    def render(self, request: JSON, status: int, response: JSON, *, stream: bool) -> Rendered:
        """JSON, or (a successful turn asked for with InvokeModelWithResponseStream) its
        chunks as event-stream frames."""
        if not stream or status != 200:
            return super().render(request, status, response, stream=False)
        body = b"".join(
            eventstream.event("chunk", {"bytes": base64.b64encode(chunk).decode()})
            for chunk in self.chunks(request, response)
        )
        return Rendered(200, eventstream.CONTENT_TYPE, body)

    def chunks(self, request: JSON, response: JSON) -> list[bytes]:
        """The chunk payloads (each one JSON document) of the stream for this answer: the
        Anthropic events of a Messages answer, the metrics on the last; any other answer in
        one chunk."""
        if not (is_messages_body(request) or "content" in response):
            return [compact_json(response).encode()]
        payloads = [
            json.loads(line[len("data: ") :])
            for line in super().stream_events(request, response).splitlines()
            if line.startswith("data: ")
        ]
        payloads = [p for p in payloads if not (isinstance(p, dict) and p.get("type") == "ping")]
        usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        payloads[-1] = {
            **payloads[-1],
            "amazon-bedrock-invocationMetrics": {
                "inputTokenCount": usage.get("input_tokens", 0),
                "outputTokenCount": usage.get("output_tokens", 0),
                "invocationLatency": 0,
                "firstByteLatency": 0,
            },
        }
        return [compact_json(payload).encode() for payload in payloads]

    def answer_from_body(self, data: bytes, content_type: str | None) -> tuple[Any, str]:
        """JSON, or the answer an event stream carries (`reassemble`)."""
        return answer_or_frames(data, content_type, self.reassemble)

    def canned_response(self, request: JSON, text: str) -> JSON:
        """A Messages answer; for an embedding body, a small vector of each input."""
        if is_messages_body(request):
            return super().canned_response(request, text)
        if isinstance(request.get("texts"), list):
            vectors = [[0.0] * 4 for _ in request["texts"]]
            return {"id": "flowproof-doctor", "embeddings": vectors, "texts": request["texts"]}
        return {"embedding": [0.0] * 4, "inputTextTokenCount": 1}

    def reassemble(self, data: bytes) -> tuple[JSON, int]:
        """The answer an event stream carries (a Messages answer rebuilt from its events),
        and how many events it had."""
        payloads: list[Any] = []
        for item in eventstream.frames(data):
            chunk = item.json()
            raw = chunk.get("bytes") if isinstance(chunk, dict) else None
            if isinstance(raw, str):
                payloads.append(json.loads(base64.b64decode(raw)))
        if len(payloads) == 1 and isinstance(payloads[0], dict) and "type" not in payloads[0]:
            return payloads[0], 1  # one whole answer (an embedding, another model's body)
        blocks: dict[int, JSON] = {}
        partial: dict[int, str] = {}
        for payload in payloads:
            if not isinstance(payload, dict):
                continue
            index = payload.get("index")
            delta = payload.get("delta")
            if payload.get("type") == "content_block_start" and isinstance(index, int):
                blocks[index] = dict(payload.get("content_block") or {})
            elif payload.get("type") == "content_block_delta" and index in blocks:
                assert isinstance(index, int)
                if isinstance(delta, dict) and delta.get("type") == "text_delta":
                    blocks[index]["text"] = blocks[index].get("text", "") + str(delta["text"])
                elif isinstance(delta, dict) and delta.get("type") == "input_json_delta":
                    partial[index] = partial.get(index, "") + str(delta.get("partial_json", ""))
        for index, raw_input in partial.items():
            blocks[index]["input"] = json.loads(raw_input) if raw_input.strip() else {}
        content = [blocks[i] for i in sorted(blocks)]
        return {"role": "assistant", "content": content}, len(payloads)

    # --- upstream ---------------------------------------------------------------------------

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        """The base URL plus the agent's path from `/model/` on, the stream asked as
        `invoke`."""
        return f"{base_url.rstrip('/')}{upstream_path(path, self._STREAMING)}"

    def upstream_auth(self, key: str) -> dict[str, str]:
        """A Bedrock API key, as for Converse (used only without AWS credentials)."""
        return bearer(key)

    def upstream_default_headers(self) -> dict[str, str]:
        """Nothing: the model's version travels in the body (`anthropic_version`)."""
        return {}

    def upstream_body(self, body: JSON) -> JSON:
        return {k: v for k, v in without_transport(body).items() if k != MODEL_FIELD}

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return bedrock_error(message, kind)
