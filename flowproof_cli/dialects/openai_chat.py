"""OpenAI Chat Completions (`.../chat/completions`), plain and streamed."""

from __future__ import annotations

import json
from typing import Any

from flowproof_cli.dialects.base import (
    JSON,
    Dialect,
    MessageOutline,
    RequestOutline,
)
from flowproof_cli.dialects.sse import data_event, split_deltas
from flowproof_cli.trajectory import AssistantTurn, ToolCall


def _text_of(content: Any) -> str:
    """Chat content is a string or a list of parts; the text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return json.dumps(content, sort_keys=True)


class OpenAIChat(Dialect):
    name = "openai-chat"
    route_suffixes = ("chat/completions",)

    def apply_mocks(self, body: JSON, mocks: dict[str, str], known_calls: dict[str, str]) -> JSON:
        messages = body.get("messages")
        if not mocks or not isinstance(messages, list):
            return body
        call_names: dict[str, str] = dict(known_calls)
        for message in messages:
            if isinstance(message, dict) and message.get("role") == "assistant":
                for call in message.get("tool_calls") or []:
                    if isinstance(call, dict) and isinstance(call.get("function"), dict):
                        call_names[str(call.get("id"))] = str(call["function"].get("name"))
        rewritten = []
        for message in messages:
            if (
                isinstance(message, dict)
                and message.get("role") == "tool"
                and call_names.get(str(message.get("tool_call_id"))) in mocks
            ):
                name = call_names[str(message["tool_call_id"])]
                rewritten.append({**message, "content": mocks[name]})
            else:
                rewritten.append(message)
        return {**body, "messages": rewritten}

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
            text=_text_of(content) if content is not None else None,
            tool_calls=calls,
            thread_key=self._system_prompt(request),
            request_size=len(json.dumps(request.get("messages", []))),
        )

    @staticmethod
    def _system_prompt(request: JSON) -> str:
        return "\n".join(
            _text_of(m.get("content"))
            for m in request.get("messages") or []
            if isinstance(m, dict) and m.get("role") in ("system", "developer")
        )

    def outline(self, request: JSON) -> RequestOutline:
        tools: dict[str, Any] = {}
        for tool in request.get("tools") or []:
            if isinstance(tool, dict):
                function = tool.get("function")
                function = function if isinstance(function, dict) else {}
                tools[str(function.get("name", tool.get("type", "?")))] = tool
        messages = []
        for message in request.get("messages") or []:
            if not isinstance(message, dict):
                continue
            calls = tuple(
                (str(c["function"].get("name")), str(c["function"].get("arguments") or ""))
                for c in message.get("tool_calls") or []
                if isinstance(c, dict) and isinstance(c.get("function"), dict)
            )
            messages.append(
                MessageOutline(
                    role=str(message.get("role")),
                    content=message.get("content"),
                    tool_calls=calls,
                    raw=message,
                )
            )
        parameters = {
            key: value
            for key, value in request.items()
            if key not in ("model", "messages", "tools")
        }
        return RequestOutline(
            model=request.get("model"),
            tools=tools,
            messages=tuple(messages),
            parameters=parameters,
        )

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

        events: list[str] = []
        for choice in response.get("choices") or []:
            index = choice.get("index", 0)
            message = choice.get("message") or {}

            def delta(payload: JSON, finish: Any = None, _index: int = index) -> JSON:
                return {
                    "index": _index,
                    "delta": payload,
                    "logprobs": None,
                    "finish_reason": finish,
                }

            events.append(
                chunk(
                    [
                        delta(
                            {
                                "role": "assistant",
                                "content": "" if message.get("content") is not None else None,
                            }
                        )
                    ]
                )
            )
            if message.get("refusal"):
                events.append(chunk([delta({"refusal": message["refusal"]})]))
            for fragment in split_deltas(_text_of(message.get("content"))):
                events.append(chunk([delta({"content": fragment})]))
            for position, call in enumerate(message.get("tool_calls") or []):
                function = call.get("function") or {}
                events.append(
                    chunk(
                        [
                            delta(
                                {
                                    "tool_calls": [
                                        {
                                            "index": position,
                                            "id": call.get("id"),
                                            "type": call.get("type", "function"),
                                            "function": {
                                                "name": function.get("name"),
                                                "arguments": "",
                                            },
                                        }
                                    ]
                                }
                            )
                        ]
                    )
                )
                for fragment in split_deltas(str(function.get("arguments") or "")):
                    events.append(
                        chunk(
                            [
                                delta(
                                    {
                                        "tool_calls": [
                                            {"index": position, "function": {"arguments": fragment}}
                                        ]
                                    }
                                )
                            ]
                        )
                    )
            events.append(chunk([delta({}, choice.get("finish_reason", "stop"))]))
        options = request.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            events.append(chunk([], usage=response.get("usage")))
        events.append("data: [DONE]\n\n")
        return "".join(events)
