"""Traces built in code for the trajectory diff, timeline and their CLI tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flowproof_cli.cassette.turn import Turn
from flowproof_cli.trace import Trace

WEATHER = ("get_weather", '{"city": "Nairobi"}')
TIME = ("get_time", "{}")


def tool(name: str, **properties: str) -> dict[str, Any]:
    """An OpenAI Chat tool declaration whose properties have the given JSON types."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {
                "type": "object",
                "properties": {key: {"type": kind} for key, kind in properties.items()},
            },
        },
    }


DEFAULT_TOOLS = [tool("get_weather", city="string"), tool("get_time")]


def chat_trace(
    *,
    calls: Sequence[tuple[str, str]] = (WEATHER, TIME),
    reply: str = "It is sunny in Nairobi.",
    system: str = "You are a weather assistant.",
    user: str = "What's the weather in Nairobi? Use both tools.",
    tools: list[dict[str, Any]] | None = None,
    model: str = "gpt-4o-mini",
    ids: str = "a",
    **extra: Any,
) -> Trace:
    """Two OpenAI Chat turns: the model asks for `calls`, then answers `reply`. `ids` seeds
    every minted id (response, call), as two real recordings would differ."""
    offered = DEFAULT_TOOLS if tools is None else tools
    tool_calls = [
        {"id": f"call_{ids}{n}", "type": "function", "function": {"name": name, "arguments": args}}
        for n, (name, args) in enumerate(calls)
    ]
    history: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]
    first = {"model": model, "messages": history, "tools": offered}
    echoed = [
        *history,
        {"role": "assistant", "content": None, "tool_calls": tool_calls},
        *(
            {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"ok": name})}
            for call, (name, _) in zip(tool_calls, calls, strict=True)
        ),
    ]
    second = {"model": model, "messages": echoed, "tools": offered}
    return Trace(
        flow="weather",
        turns=[
            Turn(
                "openai-chat", first, 200, _answer(ids, {"content": None, "tool_calls": tool_calls})
            ),
            Turn("openai-chat", second, 200, _answer(ids + "2", {"content": reply})),
        ],
        **extra,
    )


def chat_completion(text: str) -> dict[str, Any]:
    """A whole Chat Completions answer saying `text` (a fresh dict each call)."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


def tool_round(call_id: str, name: str, arguments: str, result: Any) -> list[dict[str, Any]]:
    """The two Chat Completions messages of one tool call: the assistant asking for `name`
    with `arguments`, and the tool's `result` (the content the model is told)."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def _answer(ids: str, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{ids}",
        "created": len(ids),
        "usage": {"total_tokens": 10 * len(ids)},
        "choices": [{"index": 0, "message": {"role": "assistant", **message}}],
    }


def anthropic_trace(*, ids: str = "1") -> Trace:
    """Two Anthropic turns: get_time is asked for (its tool_use id minted from `ids`), then
    answered with "It is 9."."""
    tools = [{"name": "get_time", "input_schema": {"type": "object"}}]
    ask = {"role": "user", "content": "What time is it?"}
    use = {"type": "tool_use", "id": f"toolu_{ids}", "name": "get_time", "input": {"tz": "UTC"}}
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": f"toolu_{ids}",
        "content": "09:00",
    }
    thanks = {"type": "text", "text": "Thanks."}
    second = {
        "model": "claude-x",
        "system": "Be brief.",
        "tools": tools,
        "messages": [
            ask,
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result, thanks]},
        ],
    }
    first = {"model": "claude-x", "system": "Be brief.", "tools": tools, "messages": [ask]}
    return Trace(
        flow="clock",
        mocks={"get_time": "09:00"},
        turns=[
            Turn("anthropic", first, 200, {"id": f"msg_{ids}", "content": [use]}),
            Turn("anthropic", second, 200, {"content": [{"type": "text", "text": "It is 9."}]}),
        ],
    )
