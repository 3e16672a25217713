"""Cohere's v2 chat API (`.../v2/chat`), plain and streamed.

Requests carry `messages` (`system`, `user`, `assistant` with `tool_plan` and `tool_calls`,
and `tool` entries answering a call by `tool_call_id`, whose `content` is a string or a
list of `text` / `document` blocks), `tools` in the OpenAI function shape, and `documents`
for grounded answers. A response is `{id, finish_reason, message: {role, content: [{type:
text|thinking, ...}], tool_plan?, tool_calls?: [{id, type, function: {name, arguments}}],
citations?}, usage: {billed_units, tokens}}`, the tool call's `arguments` a JSON string.

The stream (`"stream": true`) is server-sent events, each named by its `type`:
`message-start`, then per content block `content-start` / `content-delta` / `content-end`,
the plan as `tool-plan-delta`, each call as `tool-call-start` / `tool-call-delta` /
`tool-call-end`, each citation as `citation-start` / `citation-end`, and `message-end` with
the finish reason and usage. Errors are `{"id": ..., "message": ...}`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from flowproof_cli.dialects.base import (
    JSON,
    Dialect,
    MockLookup,
    without_transport,
)
from flowproof_cli.dialects.function_messages import FunctionMessages, dicts, function_of
from flowproof_cli.dialects.sse import named_event, piece_size, split_deltas
from flowproof_cli.trajectory import AssistantTurn, ToolCall

_MESSAGE_FIELDS = ("role", "content", "tool_plan", "tool_calls", "citations")


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _arguments(function: JSON) -> str:
    arguments = function.get("arguments")
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)


def _answer_text(content: Any) -> str | None:
    """The text blocks of an assistant message joined (thinking left out); None: none."""
    if isinstance(content, str):
        return content
    texts = [
        str(block.get("text", ""))
        for block in dicts(content)
        if block.get("type", "text") == "text" and isinstance(block.get("text"), str)
    ]
    return "".join(texts) if texts else None


def cohere_upstream_url(base_url: str, path: str) -> str:
    """The base URL (Cohere's `https://api.cohere.com`, as the SDK's CO_API_URL holds it)
    plus the agent's path from its API version segment on (`/v2/chat`, `/v1/rerank`); a
    base that itself ends in a version segment has it replaced by the agent's."""
    clean, _, query = path.partition("?")
    segments = [segment for segment in clean.split("/") if segment]
    versions = [i for i, segment in enumerate(segments) if _is_version(segment)]
    rest = "/" + "/".join(segments[versions[-1] :] if versions else segments)
    base = base_url.rstrip("/")
    last = base.rsplit("/", 1)[-1]
    if versions and _is_version(last) and base.count("/") > 2:
        base = base[: -len(last) - 1]
    url = f"{base}{rest}"
    return f"{url}?{query}" if query else url


def _is_version(segment: str) -> bool:
    return len(segment) >= 2 and segment[0] == "v" and segment[1:].isdigit()


def cohere_error_body(message: str, kind: str, status: int) -> JSON:
    """Cohere's error shape: an `id` and a `message` (flowproof's kind leads the text)."""
    return {"id": kind, "message": f"{kind}: {message}"}


class CohereChat(FunctionMessages, Dialect):
    """`messages` with `tool_calls` on assistant entries, answered by `tool` entries by
    `tool_call_id`; the system prompt as a `system` message."""

    call_arguments = staticmethod(_arguments)

    name = "cohere-chat"
    provider = "cohere"
    route_suffixes = ("v2/chat",)
    auth_headers = ("authorization",)
    example_request: ClassVar[JSON] = {
        "model": "command-a-03-2025",
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    conversation_key = "messages"

    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        if entry.get("role") == "assistant":
            for call in dicts(entry.get("tool_calls")):
                if call.get("id") is not None:
                    yield str(call["id"]), str(function_of(call).get("name"))

    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        """A `tool` entry's content becomes the mock's text (its blocks replaced whole)."""
        if entry.get("role") == "tool":
            call_id = entry.get("tool_call_id")
            text = lookup(None if call_id is None else str(call_id), None)
            if text is not None:
                return {**entry, "content": text}
        return entry

    # --- trajectory -----------------------------------------------------------------------

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        message = response.get("message")
        message = message if isinstance(message, dict) else {}
        calls = tuple(
            ToolCall(
                name=str(function_of(call).get("name", "")),
                raw_arguments=_arguments(function_of(call)),
                turn=turn,
                call_id=str(call["id"]) if call.get("id") is not None else None,
            )
            for call in dicts(message.get("tool_calls"))
        )
        return AssistantTurn(
            turn=turn,
            text=_answer_text(message.get("content")),
            tool_calls=calls,
            thread_key=self._system_prompt(request),
            request_size=len(json.dumps(request.get("messages", []))),
        )

    # --- rendering ------------------------------------------------------------------------

    def stream_events(self, request: JSON, response: JSON) -> str:
        message = response.get("message")
        message = message if isinstance(message, dict) else {}
        size = piece_size(response)

        def event(kind: str, **fields: Any) -> str:
            return named_event(kind, {"type": kind, **fields})

        def delta(**fields: Any) -> JSON:
            return {"message": fields}

        start: JSON = {"role": message.get("role", "assistant")}
        start.update({k: v for k, v in message.items() if k not in _MESSAGE_FIELDS})
        events = [event("message-start", id=response.get("id"), delta=delta(**start))]
        events += [
            event("tool-plan-delta", delta=delta(tool_plan=fragment))
            for fragment in split_deltas(str(message.get("tool_plan") or ""), size)
        ]
        for index, call in enumerate(dicts(message.get("tool_calls"))):
            function = function_of(call)
            opened = {**call, "function": {**function, "arguments": ""}}
            events.append(event("tool-call-start", index=index, delta=delta(tool_calls=opened)))
            events += [
                event(
                    "tool-call-delta",
                    index=index,
                    delta=delta(tool_calls={"function": {"arguments": fragment}}),
                )
                for fragment in split_deltas(_arguments(function), size)
            ]
            events.append(event("tool-call-end", index=index))
        for index, block in enumerate(dicts(message.get("content"))):
            events += self._block_events(index, block, size)
        for index, citation in enumerate(dicts(message.get("citations"))):
            events.append(event("citation-start", index=index, delta=delta(citations=citation)))
            events.append(event("citation-end", index=index))
        end: JSON = {"finish_reason": response.get("finish_reason")}
        if "usage" in response:
            end["usage"] = response["usage"]
        events.append(event("message-end", delta=end))
        return "".join(events)

    @staticmethod
    def _block_events(index: int, block: JSON, size: int) -> list[str]:
        """`content-start`, its deltas, `content-end` for one text or thinking block."""
        kind = "thinking" if block.get("type") == "thinking" else "text"
        start = {**block, kind: ""}
        events = [
            named_event(
                "content-start",
                {"type": "content-start", "index": index, "delta": {"message": {"content": start}}},
            )
        ]
        events += [
            named_event(
                "content-delta",
                {
                    "type": "content-delta",
                    "index": index,
                    "delta": {"message": {"content": {kind: fragment}}},
                },
            )
            for fragment in split_deltas(str(block.get(kind) or ""), size)
        ]
        events.append(named_event("content-end", {"type": "content-end", "index": index}))
        return events

    def reassemble_events(self, events: list[tuple[str, Any]]) -> JSON:
        """The response a stream's events carry: text, plan and calls joined by index."""
        response: JSON = {}
        message: JSON = {"role": "assistant"}
        blocks: dict[int, JSON] = {}
        calls: dict[int, JSON] = {}
        plan = ""
        for _, payload in events:
            if not isinstance(payload, dict):
                continue
            kind, index = payload.get("type"), payload.get("index")
            delta = _dict(payload.get("delta"))
            part = _dict(delta.get("message"))
            if kind == "message-start":
                response["id"] = payload.get("id")
            elif kind == "content-start" and isinstance(index, int):
                blocks[index] = dict(part.get("content") or {})
            elif kind == "content-delta" and index in blocks:
                for key, value in dict(part.get("content") or {}).items():
                    blocks[index][key] = str(blocks[index].get(key, "")) + str(value)
            elif kind == "tool-plan-delta":
                plan += str(part.get("tool_plan") or "")
            elif kind == "tool-call-start" and isinstance(index, int):
                calls[index] = json.loads(json.dumps(part.get("tool_calls") or {}))
            elif kind == "tool-call-delta" and index in calls:
                fragment = function_of(part.get("tool_calls")).get("arguments") or ""
                function = calls[index].setdefault("function", {})
                function["arguments"] = str(function.get("arguments") or "") + str(fragment)
            elif kind == "message-end":
                response.update(delta)
        if blocks:
            message["content"] = [blocks[i] for i in sorted(blocks)]
        if plan:
            message["tool_plan"] = plan
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return {**response, "message": message}

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {
            "id": "flowproof-doctor",
            "finish_reason": "COMPLETE",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "usage": {"tokens": {"input_tokens": 1, "output_tokens": 1}},
        }

    # --- upstream -------------------------------------------------------------------------

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        return cohere_upstream_url(base_url, path)

    def upstream_body(self, body: JSON) -> JSON:
        """Always the plain answer: `stream: false` said (the SDK's non-streaming call does
        too)."""
        return {**without_transport(body), "stream": False}

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return cohere_error_body(message, kind, status)
