"""Amazon Bedrock Converse (`/model/<modelId>/converse`) and ConverseStream
(`/model/<modelId>/converse-stream`).

Bedrock carries the model in the path, percent-encoded (`us.anthropic.claude-...-v1%3A0`,
an ARN with its `/` as `%2F`), and the streaming choice in the operation. `normalize` folds
both into the body (`modelId`, and the transport field `stream`), so matching, outlines
and `wants_stream` work as for the others; record forwards the non-streaming Converse and
the stream is synthesized from its answer, at record and replay alike.

A request has `messages` (`{role: user|assistant, content: [blocks]}`), `system` (a list of
blocks), `inferenceConfig`, `toolConfig` (`{tools: [{toolSpec: {name, description,
inputSchema: {json}}}], toolChoice}`) and `additionalModelRequestFields`. A tool call is a
`toolUse {toolUseId, name, input}` block of an assistant message; its result goes back as a
`toolResult {toolUseId, content: [{text}|{json}], status?}` block of the next user message.
The answer is `{output: {message}, stopReason, usage, metrics}`; the stream is event-stream
frames (`messageStart`, `contentBlockStart` for a tool call, `contentBlockDelta`,
`contentBlockStop`, `messageStop`, `metadata`), see `eventstream.py`.

Requests are signed (AWS SigV4) over the host, so record re-signs the forwarded request
with flowproof's own AWS credentials (`providers/aws_signing.py`); the agent's placeholder
signature never travels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, ClassVar
from urllib.parse import quote, unquote

from flowproof_cli.canonical import canonical_json, compact_json, parse_or
from flowproof_cli.dialects import eventstream
from flowproof_cli.dialects.base import (
    JSON,
    Dialect,
    MessageOutline,
    MockLookup,
    Rendered,
    RequestOutline,
    bare_key,
    text_of,
    without_transport,
)
from flowproof_cli.dialects.sse import piece_size, split_deltas
from flowproof_cli.trajectory import AssistantTurn, ToolCall

#: The request field the path's model is folded into (the API's own name for it).
MODEL_FIELD = "modelId"
#: The service name SigV4 signs Bedrock runtime requests for.
SIGNING_SERVICE = "bedrock"


def _dicts(value: Any) -> list[JSON]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def model_and_operation(path: str) -> tuple[str | None, str, str]:
    """`/model/<id>/<operation>` -> (the model id, decoded; the operation; the path up to
    `/model/`, dropped upstream). A path without `/model/` has no model id."""
    clean = path.split("?", 1)[0].rstrip("/")
    head, _, operation = clean.rpartition("/")
    prefix, found, encoded = head.rpartition("/model/")
    if not found:
        return None, operation, ""
    return unquote(encoded), operation, prefix


def upstream_path(path: str, streaming: dict[str, str]) -> str:
    """The agent's path from `/model/` on, its streaming operation made the plain one (the
    model id re-encoded as the SDKs send it), the query string kept."""
    model, operation, _ = model_and_operation(path)
    query = path.split("?", 1)[1] if "?" in path else ""
    operation = streaming.get(operation, operation)
    url = f"/model/{quote(model or '', safe='')}/{operation}"
    return f"{url}?{query}" if query else url


def fold_path(path: str, body: JSON, streaming: dict[str, str]) -> JSON:
    """The body with the path's model as `modelId` and a streaming operation as
    `stream: True` (transport, never matched)."""
    model, operation, _ = model_and_operation(path)
    normalized = without_transport(body)
    if model is not None:
        normalized[MODEL_FIELD] = model
    if operation in streaming:
        normalized["stream"] = True
    return normalized


def bearer(key: str) -> dict[str, str]:
    """A Bedrock API key in the `Authorization` header (a bare key is Bearer-wrapped)."""
    return {"authorization": f"Bearer {bare_key(key)}"}


def answer_or_frames(
    data: bytes, content_type: str | None, reassemble: Callable[[bytes], tuple[JSON, int]]
) -> tuple[Any, str]:
    """A body's answer: an event stream (by its media type, else by a frame's prelude CRC)
    reassembled, anything else as JSON. ValueError for a body it cannot read."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media == eventstream.CONTENT_TYPE or (not media and eventstream.looks_like_frames(data)):
        answer, count = reassemble(data)
        return answer, f", reassembled from {count} event-stream frames"
    return json.loads(data), ""


def bedrock_error(message: str, kind: str) -> JSON:
    """Bedrock's JSON error: `message`, and the error code in `__type` (botocore and the
    JavaScript SDK read it there when the `x-amzn-ErrorType` header is absent)."""
    return {"message": message, "__type": kind}


class BedrockConverse(Dialect):
    """Converse: content blocks, `toolUse` asked by the assistant, `toolResult` answered in
    the next user message; the system prompt in `system`; the model in the path."""

    name = "bedrock-converse"
    provider = "bedrock"
    route_suffixes = ("converse", "converse-stream")
    #: The client's SigV4 signature (or a Bedrock API key) and its session token.
    auth_headers = ("authorization", "x-amz-security-token")
    conversation_key = "messages"
    system_fields = ("system",)
    #: Record signs the forwarded request (SigV4) instead of sending a key.
    stream_media_type = eventstream.CONTENT_TYPE
    example_request: ClassVar[JSON] = {
        "messages": [{"role": "user", "content": [{"text": "Hello"}]}],
        "system": [{"text": "You are a helpful assistant."}],
        "inferenceConfig": {"maxTokens": 64},
    }
    _STREAMING: ClassVar[dict[str, str]] = {"converse-stream": "converse"}

    def normalize(self, path: str, body: JSON) -> JSON:
        return fold_path(path, body, self._STREAMING)

    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        if entry.get("role") == "assistant":
            for block in _dicts(entry.get("content")):
                use = block.get("toolUse")
                if isinstance(use, dict) and "toolUseId" in use:
                    yield str(use["toolUseId"]), str(use.get("name"))

    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        """A user message's `toolResult` blocks: the content becomes one text block holding
        the mock's text (its `status` dropped: the mock is the tool's answer)."""
        content = entry.get("content")
        if entry.get("role") != "user" or not isinstance(content, list):
            return entry
        return {**entry, "content": [_mocked_block(block, lookup) for block in content]}

    # --- trajectory -------------------------------------------------------------------------

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        content = _content_of(response)
        texts = [str(block["text"]) for block in content if isinstance(block.get("text"), str)]
        calls = tuple(
            ToolCall(
                name=str(use.get("name", "")),
                raw_arguments=canonical_json(use.get("input", {})),
                turn=turn,
                call_id=str(use["toolUseId"]) if use.get("toolUseId") is not None else None,
            )
            for use in (block.get("toolUse") for block in content)
            if isinstance(use, dict)
        )
        size = len(json.dumps(request.get("messages", [])))
        if "system" in request:
            size += len(json.dumps(request["system"]))
        return AssistantTurn(
            turn=turn,
            text="".join(texts) if texts else None,
            tool_calls=calls,
            thread_key=text_of(request.get("system"), "\n"),
            request_size=size,
        )

    # --- divergence -------------------------------------------------------------------------

    def outline(self, request: JSON) -> RequestOutline:
        """The model from `modelId`; the tools from `toolConfig.tools`, the rest of
        `toolConfig` (`toolChoice`) a parameter."""
        parameters = {k: v for k, v in request.items() if k not in self._outline_fields}
        config = request.get("toolConfig")
        if isinstance(config, dict):
            rest = {k: v for k, v in config.items() if k != "tools"}
            if rest:
                parameters["toolConfig"] = rest
        elif config is not None:
            parameters["toolConfig"] = config
        return RequestOutline(
            model=request.get(MODEL_FIELD),
            tools=dict(self._tools_in(request)),
            messages=tuple(self._messages_in(request)),
            parameters=parameters,
        )

    @property
    def _outline_fields(self) -> frozenset[str]:
        return frozenset({MODEL_FIELD, "toolConfig", "messages", "system"})

    def _tools_in(self, request: JSON) -> Iterator[tuple[str, Any]]:
        config = request.get("toolConfig")
        for tool in _dicts(config.get("tools") if isinstance(config, dict) else None):
            spec = tool.get("toolSpec")
            if isinstance(spec, dict):
                yield str(spec.get("name", "?")), spec
            else:  # a cache point or a system tool, by its kind
                yield from tool.items()

    def _messages_in(self, request: JSON) -> Iterator[MessageOutline]:
        system = request.get("system")
        if system is not None:
            yield MessageOutline(role="system", content=text_of(system, "\n"), raw=system)
        for message in _dicts(request.get("messages")):
            content = message.get("content")
            calls: tuple[tuple[str, str], ...] = ()
            if message.get("role") == "assistant":
                calls = tuple(
                    (str(use.get("name")), canonical_json(use.get("input", {})))
                    for use in (block.get("toolUse") for block in _dicts(content))
                    if isinstance(use, dict)
                )
            yield MessageOutline(
                role=str(message.get("role")), content=content, tool_calls=calls, raw=message
            )

    # --- rendering --------------------------------------------------------------------------

    def render(self, request: JSON, status: int, response: JSON, *, stream: bool) -> Rendered:
        """JSON, or (a successful turn asked for as ConverseStream) event-stream frames."""
        if not stream or status != 200:
            return super().render(request, status, response, stream=False)
        body = b"".join(eventstream.event(kind, payload) for kind, payload in self.events(response))
        return Rendered(200, eventstream.CONTENT_TYPE, body)

    def stream_events(self, request: JSON, response: JSON) -> str:
        """The stream's events as text, one `event: payload` line each (the wire form is
        binary frames: `render`); for logs and tests that read a stream by eye."""
        return "".join(
            f"{kind}: {compact_json(payload)}\n" for kind, payload in self.events(response)
        )

    def events(self, response: JSON) -> list[tuple[str, JSON]]:
        """The ConverseStream events a real server would send for this answer, in order.

        Deterministic: a text block is split into several `text` deltas, a tool call opens
        with `contentBlockStart` (its id and name) and sends its input as partial JSON
        deltas, a reasoning block sends its text then its signature; `messageStop` carries
        the stop reason, `metadata` the usage and metrics, all from the recording.
        """
        output = response.get("output")
        message = output.get("message") if isinstance(output, dict) else None
        role = message.get("role", "assistant") if isinstance(message, dict) else "assistant"
        events: list[tuple[str, JSON]] = [("messageStart", {"role": role})]
        size = piece_size(response)
        for index, block in enumerate(_content_of(response)):
            events += _block_events(index, block, size)
        stop: JSON = {"stopReason": response.get("stopReason", "end_turn")}
        if "additionalModelResponseFields" in response:
            stop["additionalModelResponseFields"] = response["additionalModelResponseFields"]
        events.append(("messageStop", stop))
        metadata: JSON = {
            key: response[key]
            for key in ("usage", "metrics", "trace", "performanceConfig")
            if key in response
        }
        metadata.setdefault("usage", {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0})
        metadata.setdefault("metrics", {"latencyMs": 0})
        events.append(("metadata", metadata))
        return events

    def answer_from_body(self, data: bytes, content_type: str | None) -> tuple[Any, str]:
        """JSON, or the answer an event stream carries (`reassemble`)."""
        return answer_or_frames(data, content_type, self.reassemble)

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
            "metrics": {"latencyMs": 0},
        }

    def reassemble(self, data: bytes) -> tuple[JSON, int]:
        """The Converse answer an event stream carries, and how many events it had (the
        conversation view reads a streamed answer as the plain one)."""
        blocks: dict[int, JSON] = {}
        partial: dict[int, str] = {}
        answer: JSON = {}
        count = 0
        for item in eventstream.frames(data):
            count += 1
            payload = item.json()
            if not isinstance(payload, dict):
                continue
            index = payload.get("contentBlockIndex")
            kind = item.event_type
            if kind == "contentBlockStart" and isinstance(index, int):
                start = payload.get("start")
                if isinstance(start, dict) and isinstance(start.get("toolUse"), dict):
                    blocks[index] = {"toolUse": dict(start["toolUse"])}
            elif kind == "contentBlockDelta" and isinstance(index, int):
                _apply_delta(blocks, partial, index, payload.get("delta"))
            elif kind == "messageStop":
                answer.update(payload)
            elif kind == "metadata":
                answer.update({k: v for k, v in payload.items() if k in ("usage", "metrics")})
        for index, raw in partial.items():
            blocks[index]["toolUse"]["input"] = parse_or(raw, raw) if raw.strip() else {}
        content = [blocks[i] for i in sorted(blocks)]
        return {"output": {"message": {"role": "assistant", "content": content}}, **answer}, count

    # --- upstream ---------------------------------------------------------------------------

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        """The base URL (`https://bedrock-runtime.<region>.amazonaws.com`) plus the agent's
        path from `/model/` on, `converse-stream` asked as `converse`."""
        return f"{base_url.rstrip('/')}{upstream_path(path, self._STREAMING)}"

    def upstream_auth(self, key: str) -> dict[str, str]:
        """A Bedrock API key, as `Authorization: Bearer` (used only when no AWS credentials
        are set: record signs with those first, see `providers/aws_signing.py`)."""
        return bearer(key)

    def upstream_default_headers(self) -> dict[str, str]:
        return {"accept": "application/json"}

    def upstream_body(self, body: JSON) -> JSON:
        """Transport fields dropped, and `modelId` too: the upstream reads it from the URL."""
        return {k: v for k, v in without_transport(body).items() if k != MODEL_FIELD}

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return bedrock_error(message, kind)


def _content_of(response: JSON) -> list[JSON]:
    output = response.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    return _dicts(message.get("content")) if isinstance(message, dict) else []


def _mocked_block(block: Any, lookup: MockLookup) -> Any:
    result = block.get("toolResult") if isinstance(block, dict) else None
    if not isinstance(result, dict):
        return block
    text = lookup(str(result.get("toolUseId")), None)
    if text is None:
        return block
    answered = {k: v for k, v in result.items() if k != "status"}
    answered["content"] = [{"text": text}]
    return {**block, "toolResult": answered}


def _block_events(index: int, block: JSON, size: int) -> list[tuple[str, JSON]]:
    """`contentBlockStart` (a tool call), the deltas and `contentBlockStop` of one block."""
    at = {"contentBlockIndex": index}
    events: list[tuple[str, JSON]] = []
    deltas: list[JSON] = []
    if isinstance(block.get("text"), str):
        deltas = [{"text": piece} for piece in split_deltas(block["text"], size)] or [{"text": ""}]
    elif isinstance(block.get("toolUse"), dict):
        use = block["toolUse"]
        start = {k: v for k, v in use.items() if k in ("toolUseId", "name")}
        events.append(("contentBlockStart", {"start": {"toolUse": start}, **at}))
        raw = compact_json(use.get("input", {}))
        deltas = [{"toolUse": {"input": piece}} for piece in split_deltas(raw, size)]
    elif isinstance(block.get("reasoningContent"), dict):
        reasoning = block["reasoningContent"].get("reasoningText")
        reasoning = reasoning if isinstance(reasoning, dict) else {}
        deltas = [
            {"reasoningContent": {"text": piece}}
            for piece in split_deltas(str(reasoning.get("text", "")), size)
        ]
        if reasoning.get("signature"):
            deltas.append({"reasoningContent": {"signature": reasoning["signature"]}})
        redacted = block["reasoningContent"].get("redactedContent")
        if redacted is not None:
            deltas.append({"reasoningContent": {"redactedContent": redacted}})
    else:  # a block the stream has no delta for: sent whole, as the only delta
        deltas = [block]
    events += [("contentBlockDelta", {"delta": delta, **at}) for delta in deltas]
    events.append(("contentBlockStop", at))
    return events


def _apply_delta(blocks: dict[int, JSON], partial: dict[int, str], index: int, delta: Any) -> None:
    """Join one `contentBlockDelta` into the block it belongs to."""
    if not isinstance(delta, dict):
        return
    if isinstance(delta.get("text"), str):
        block = blocks.setdefault(index, {"text": ""})
        block["text"] = str(block.get("text", "")) + delta["text"]
    elif isinstance(delta.get("toolUse"), dict):
        blocks.setdefault(index, {"toolUse": {}})
        partial[index] = partial.get(index, "") + str(delta["toolUse"].get("input", ""))
    elif isinstance(delta.get("reasoningContent"), dict):
        block = blocks.setdefault(index, {"reasoningContent": {"reasoningText": {"text": ""}}})
        text = block["reasoningContent"].setdefault("reasoningText", {})
        piece = delta["reasoningContent"]
        if isinstance(piece.get("text"), str):
            text["text"] = str(text.get("text", "")) + piece["text"]
        if "signature" in piece:
            text["signature"] = piece["signature"]
    else:
        blocks[index] = delta
