"""Anthropic Messages (`.../v1/messages`), plain and streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from flowproof_cli.canonical import canonical_json, compact_json
from flowproof_cli.dialects.base import (
    JSON,
    Dialect,
    MessageOutline,
    MockLookup,
    PlainMessages,
    bare_key,
    text_of,
)
from flowproof_cli.dialects.sse import named_event, piece_size, split_deltas
from flowproof_cli.trajectory import AssistantTurn, ToolCall, is_probe

#: Usage fields a `message_delta` event carries (cumulative totals).
_DELTA_USAGE_FIELDS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
    "output_tokens_details",
    "server_tool_use",
)

#: `max_tokens` of flowproof's own requests (the API requires one): a user's message.
PLAIN_MAX_TOKENS = 1024


def _blocks(content: Any) -> list[JSON]:
    """The dict blocks of a content list (a string content has none)."""
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _tracks_input(block: JSON) -> bool:
    """Blocks whose `input` streams as `input_json_delta` (tool_use, server_tool_use, ...)."""
    return str(block.get("type", "")).endswith("tool_use") and "input" in block


def _mocked_block(block: Any, lookup: MockLookup) -> Any:
    """A `tool_result` block answered by its mock (any other block as it is)."""
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return block
    text = lookup(str(block.get("tool_use_id")), None)
    return block if text is None else {**block, "content": text}


class AnthropicMessages(Dialect):
    """`messages` of content blocks: `tool_use` asked by the assistant, `tool_result` answered
    in the next user message; the system prompt in `system`."""

    name = "anthropic"
    provider = "anthropic"
    route_suffixes = ("messages",)
    auth_headers = ("x-api-key", "authorization")
    conversation_key = "messages"
    system_fields = ("system",)
    example_request: ClassVar[JSON] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say hello."}],
    }

    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        if entry.get("role") == "assistant":
            for block in _blocks(entry.get("content")):
                if block.get("type") == "tool_use" and "id" in block:
                    yield str(block["id"]), str(block.get("name"))

    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        """A user message's `tool_result` blocks."""
        content = entry.get("content")
        if entry.get("role") != "user" or not isinstance(content, list):
            return entry
        return {**entry, "content": [_mocked_block(block, lookup) for block in content]}

    # --- trajectory -----------------------------------------------------------------------

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        content = _blocks(response.get("content"))
        texts = [str(block.get("text", "")) for block in content if block.get("type") == "text"]
        calls = tuple(
            ToolCall(
                name=str(block.get("name", "")),
                raw_arguments=canonical_json(block.get("input", {})),
                turn=turn,
                call_id=block.get("id"),
            )
            for block in content
            if block.get("type") == "tool_use"
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
            probe=is_probe(request.get("max_tokens")),
        )

    # --- divergence -----------------------------------------------------------------------

    def _tools_in(self, request: JSON) -> Iterator[tuple[str, Any]]:
        for tool in request.get("tools") or []:
            if isinstance(tool, dict):
                yield str(tool.get("name", tool.get("type", "?"))), tool

    def _messages_in(self, request: JSON) -> Iterator[MessageOutline]:
        system = request.get("system")
        if system is not None:
            yield MessageOutline(role="system", content=system)
        for message in request.get("messages") or []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            calls: tuple[tuple[str, str], ...] = ()
            if message.get("role") == "assistant":
                calls = tuple(
                    (str(block.get("name")), canonical_json(block.get("input", {})))
                    for block in _blocks(content)
                    if block.get("type") == "tool_use"
                )
            yield MessageOutline(
                role=str(message.get("role")), content=content, tool_calls=calls, raw=message
            )

    # --- rendering ------------------------------------------------------------------------

    def stream_events(self, request: JSON, response: JSON) -> str:
        usage = response.get("usage")
        usage = dict(usage) if isinstance(usage, dict) else {}
        output_tokens = usage.get("output_tokens", 1)
        start_usage = {"input_tokens": 0, **usage}
        start_usage["output_tokens"] = (
            min(1, output_tokens) if isinstance(output_tokens, int) else 1
        )
        message: JSON = {
            "id": response.get("id", "msg_flowproof"),
            "type": response.get("type", "message"),
            "role": response.get("role", "assistant"),
            "model": response.get("model", request.get("model")),
        }
        for key, value in response.items():
            if key not in message:
                message[key] = value
        message.update(content=[], stop_reason=None, stop_sequence=None, usage=start_usage)
        if "stop_details" in message:
            message["stop_details"] = None

        events = [named_event("message_start", {"type": "message_start", "message": message})]
        blocks = _blocks(response.get("content"))
        ping = named_event("ping", {"type": "ping"})
        if not blocks:
            events.append(ping)
        size = piece_size(response)
        for index, block in enumerate(blocks):
            block_events = self._block_events(index, block, size)
            # Like the API: a ping follows the first content_block_start.
            events += [block_events[0], ping, *block_events[1:]] if index == 0 else block_events

        delta: JSON = {
            "stop_reason": response.get("stop_reason"),
            "stop_sequence": response.get("stop_sequence"),
        }
        for key in ("stop_details", "container"):
            if key in response:
                delta[key] = response[key]
        delta_usage = {key: usage[key] for key in _DELTA_USAGE_FIELDS if key in usage}
        delta_usage.setdefault("output_tokens", output_tokens)
        events.append(
            named_event(
                "message_delta", {"type": "message_delta", "delta": delta, "usage": delta_usage}
            )
        )
        events.append(named_event("message_stop", {"type": "message_stop"}))
        return "".join(events)

    @staticmethod
    def _block_events(index: int, block: JSON, size: int) -> list[str]:
        """`content_block_start`, its deltas and `content_block_stop` for one block."""
        kind = block.get("type")
        deltas: list[JSON] = []
        start: JSON
        if kind == "text":
            start = {key: value for key, value in block.items() if key not in ("text", "citations")}
            start["text"] = ""
            deltas += [
                {"type": "citations_delta", "citation": citation}
                for citation in block.get("citations") or []
            ]
            deltas += [
                {"type": "text_delta", "text": fragment}
                for fragment in split_deltas(str(block.get("text", "")), size)
            ]
        elif kind == "thinking":
            start = {
                key: value for key, value in block.items() if key not in ("thinking", "signature")
            }
            start["thinking"] = ""
            deltas += [
                {"type": "thinking_delta", "thinking": fragment}
                for fragment in split_deltas(str(block.get("thinking", "")), size)
            ]
            if block.get("signature"):
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif _tracks_input(block):
            start = {**block, "input": {}}
            deltas += [
                {"type": "input_json_delta", "partial_json": fragment}
                for fragment in split_deltas(compact_json(block["input"]), size)
            ]
        else:
            # Blocks the API sends whole (redacted_thinking, server tool results, ...).
            start = dict(block)
        events = [
            named_event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        ]
        events += [
            named_event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            for delta in deltas
        ]
        events.append(
            named_event("content_block_stop", {"type": "content_block_stop", "index": index})
        )
        return events

    def reassemble_events(self, events: list[tuple[str, Any]]) -> JSON:
        """Content blocks opened, their text, thinking and input JSON deltas joined."""
        blocks: dict[int, JSON] = {}
        partial: dict[int, str] = {}
        message: JSON = {"role": "assistant"}
        for _, payload in events:
            if not isinstance(payload, dict):
                continue
            kind, index, delta = payload.get("type"), payload.get("index"), payload.get("delta")
            if kind == "message_start" and isinstance(payload.get("message"), dict):
                message = {**payload["message"]}
            elif kind == "message_delta" and isinstance(delta, dict):
                message.update(delta)
            elif kind == "content_block_start" and isinstance(index, int):
                blocks[index] = dict(payload.get("content_block") or {})
            elif kind == "content_block_delta" and index in blocks and isinstance(delta, dict):
                block = blocks[index]
                if delta.get("type") == "text_delta":
                    block["text"] = block.get("text", "") + str(delta.get("text", ""))
                elif delta.get("type") == "thinking_delta":
                    block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
                elif delta.get("type") == "input_json_delta":
                    partial[index] = partial.get(index, "") + str(delta.get("partial_json", ""))
        for index, raw in partial.items():
            try:
                blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
            except ValueError:
                blocks[index]["input"] = raw
        return {**message, "content": [blocks[i] for i in sorted(blocks)]}

    def plain_request(self, model: str, system: str, messages: PlainMessages) -> tuple[str, JSON]:
        entries = [{"role": role, "content": text} for role, text in messages]
        body = {"model": model, "max_tokens": PLAIN_MAX_TOKENS, "system": system}
        return "/v1/messages", {**body, "messages": entries}

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {
            "id": "msg_flowproof_doctor",
            "type": "message",
            "role": "assistant",
            "model": request.get("model") or "flowproof-doctor",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    # --- upstream -------------------------------------------------------------------------

    def upstream_url(self, base_url: str, query: str) -> str:
        """`.../v1` + `/messages`; a base without `/v1` (the Anthropic SDK convention for
        ANTHROPIC_BASE_URL) gets `/v1/messages`."""
        base = base_url.rstrip("/")
        url = f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"
        return f"{url}?{query}" if query else url

    def upstream_default_headers(self) -> dict[str, str]:
        return {"anthropic-version": "2023-06-01"}

    def upstream_auth(self, key: str) -> dict[str, str]:
        """Anthropic's `x-api-key` header, with any `Bearer ` prefix removed."""
        return {"x-api-key": bare_key(key)}

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return {"type": "error", "error": {"type": kind, "message": message}}
