"""OpenAI Chat Completions (`.../chat/completions`), plain and streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from flowproof_cli.dialects.base import (
    JSON,
    Dialect,
    MessageOutline,
    MockLookup,
    PlainMessages,
    text_of,
)
from flowproof_cli.dialects.sse import data_event, piece_size, split_deltas
from flowproof_cli.trajectory import AssistantTurn, ToolCall


def _function(call: Any) -> JSON | None:
    """The `function` of a tool call entry (None when the entry has none)."""
    if isinstance(call, dict) and isinstance(call.get("function"), dict):
        return call["function"]
    return None


class OpenAIChat(Dialect):
    """`messages` with `tool_calls` on assistant entries, answered by `tool` entries."""

    name = "openai-chat"
    provider = "openai"
    route_suffixes = ("chat/completions",)
    conversation_key = "messages"
    example_request: ClassVar[JSON] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Say hello."}],
    }

    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        if entry.get("role") == "assistant":
            for call in entry.get("tool_calls") or []:
                if (function := _function(call)) is not None:
                    yield str(call.get("id")), str(function.get("name"))

    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        if entry.get("role") == "tool":
            text = lookup(str(entry.get("tool_call_id")), None)
            if text is not None:
                return {**entry, "content": text}
        return entry

    # --- trajectory -----------------------------------------------------------------------

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        message: JSON = {}
        choices = response.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message") or {}
        calls = tuple(
            ToolCall(
                name=str(call.get("function", {}).get("name", "")),
                raw_arguments=str(call.get("function", {}).get("arguments") or ""),
                turn=turn,
                call_id=call.get("id"),
            )
            for call in message.get("tool_calls") or []
            if isinstance(call, dict)
        )
        content = message.get("content")
        return AssistantTurn(
            turn=turn,
            text=text_of(content) if content is not None else None,
            tool_calls=calls,
            thread_key=self._system_prompt(request),
            request_size=len(json.dumps(request.get("messages", []))),
        )

    @staticmethod
    def _system_prompt(request: JSON) -> str:
        return "\n".join(
            text_of(m.get("content"))
            for m in request.get("messages") or []
            if isinstance(m, dict) and m.get("role") in ("system", "developer")
        )

    # --- divergence -----------------------------------------------------------------------

    def _tools_in(self, request: JSON) -> Iterator[tuple[str, Any]]:
        for tool in request.get("tools") or []:
            if isinstance(tool, dict):
                function = tool.get("function")
                function = function if isinstance(function, dict) else {}
                yield str(function.get("name", tool.get("type", "?"))), tool

    def _messages_in(self, request: JSON) -> Iterator[MessageOutline]:
        for message in request.get("messages") or []:
            if not isinstance(message, dict):
                continue
            calls = tuple(
                (str(function.get("name")), str(function.get("arguments") or ""))
                for function in map(_function, message.get("tool_calls") or [])
                if function is not None
            )
            yield MessageOutline(
                role=str(message.get("role")),
                content=message.get("content"),
                tool_calls=calls,
                raw=message,
            )

    # --- rendering ------------------------------------------------------------------------

    def stream_events(self, request: JSON, response: JSON) -> str:
        envelope = {
            "id": response.get("id", "chatcmpl-flowproof"),
            "object": "chat.completion.chunk",
            "created": response.get("created", 0),
            "model": response.get("model", request.get("model")),
        }
        if "system_fingerprint" in response:
            envelope["system_fingerprint"] = response["system_fingerprint"]

        def chunk(choices: list[JSON], **extra: Any) -> str:
            return data_event({**envelope, "choices": choices, **extra})

        size = piece_size(response)
        events = [
            chunk([delta])
            for choice in response.get("choices") or []
            for delta in _choice_deltas(choice, size)
        ]
        options = request.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            events.append(chunk([], usage=response.get("usage")))
        events.append("data: [DONE]\n\n")
        return "".join(events)

    def reassemble_events(self, events: list[tuple[str, Any]]) -> JSON:
        """Chat chunks: each choice's text and tool-call fragments joined by index."""
        choices: dict[int, JSON] = {}
        for _, payload in events:
            for choice in _dicts(payload.get("choices") if isinstance(payload, dict) else None):
                entry = choices.setdefault(
                    _index(choice), {"text": None, "calls": {}, "finish": None}
                )
                delta = choice.get("delta")
                delta = delta if isinstance(delta, dict) else {}
                if isinstance(delta.get("content"), str):
                    entry["text"] = (entry["text"] or "") + delta["content"]
                for part in _dicts(delta.get("tool_calls")):
                    _join_call(entry["calls"], part)
                entry["finish"] = choice.get("finish_reason") or entry["finish"]
        return {
            "choices": [
                {
                    "index": index,
                    "message": {
                        "role": "assistant",
                        "content": entry["text"],
                        "tool_calls": [entry["calls"][i] for i in sorted(entry["calls"])],
                    },
                    "finish_reason": entry["finish"],
                }
                for index, entry in sorted(choices.items())
            ]
        }

    def plain_request(self, model: str, system: str, messages: PlainMessages) -> tuple[str, JSON]:
        entries = [{"role": role, "content": text} for role, text in messages]
        return "/v1/chat/completions", {
            "model": model,
            "messages": [{"role": "system", "content": system}, *entries],
        }

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {
            "id": "chatcmpl-flowproof-doctor",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model") or "flowproof-doctor",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


def _dicts(value: Any) -> list[JSON]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _index(entry: JSON) -> int:
    index = entry.get("index")
    return index if isinstance(index, int) else 0


def _join_call(calls: dict[int, JSON], part: JSON) -> None:
    """One streamed tool-call fragment joined onto the call of its index."""
    call = calls.setdefault(
        _index(part),
        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
    )
    call["id"] = part.get("id") or call["id"]
    function = part.get("function")
    function = function if isinstance(function, dict) else {}
    call["function"]["name"] += str(function.get("name") or "")
    call["function"]["arguments"] += str(function.get("arguments") or "")


def _choice_deltas(choice: JSON, size: int) -> Iterator[JSON]:
    """One choice's chunks: the role, any refusal, the text, each tool call, the finish."""
    index = choice.get("index", 0)
    message = choice.get("message") or {}

    def delta(payload: JSON, finish: Any = None) -> JSON:
        return {"index": index, "delta": payload, "logprobs": None, "finish_reason": finish}

    content = message.get("content")
    yield delta({"role": "assistant", "content": "" if content is not None else None})
    if message.get("refusal"):
        yield delta({"refusal": message["refusal"]})
    for fragment in split_deltas(text_of(content), size):
        yield delta({"content": fragment})
    for position, call in enumerate(message.get("tool_calls") or []):
        yield delta({"tool_calls": [_call_delta(position, call)]})
    yield delta({}, choice.get("finish_reason", "stop"))


def _call_delta(position: int, call: JSON) -> JSON:
    """A tool call as streamed: whole, in one delta (id, name and all its arguments).

    Every OpenAI-compatible client reads this shape (vLLM, Groq, Mistral and Ollama send it),
    while one client, mistralai, refuses the other (a first delta with the name, then
    argument fragments without it: its chunk model requires `function.name` on each)."""
    function = call.get("function") or {}
    return {
        "index": position,
        "id": call.get("id"),
        "type": call.get("type", "function"),
        "function": {
            "name": function.get("name"),
            "arguments": str(function.get("arguments") or ""),
        },
    }
