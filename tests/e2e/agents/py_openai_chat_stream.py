"""Real agent: openai-python Chat Completions, streamed (stream=True + include_usage).

Accumulates content and tool-call deltas by hand, as streaming agents do.
"""

from __future__ import annotations

import datetime
import json
import os
import sys

from openai import OpenAI

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The current UTC time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


def run_tool(name: str, arguments: str) -> str:
    args = json.loads(arguments or "{}")
    if name == "get_weather":
        return json.dumps({"city": args["city"], "forecast": "sunny"})
    if name == "get_time":
        return json.dumps({"utc": datetime.datetime.now(datetime.UTC).isoformat()})
    raise ValueError(f"unknown tool {name!r}")


def stream_turn(client: OpenAI, messages: list[dict]) -> tuple[str, list[dict], bool]:
    """One streamed call: (text, tool_calls, saw_usage)."""
    text: list[str] = []
    calls: dict[int, dict] = {}
    saw_usage = False
    stream = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.usage is not None:
            saw_usage = True
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for part in delta.tool_calls or []:
                call = calls.setdefault(
                    part.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if part.id:
                    call["id"] = part.id
                if part.function and part.function.name:
                    call["function"]["name"] += part.function.name
                if part.function and part.function.arguments:
                    call["function"]["arguments"] += part.function.arguments
    return "".join(text), [calls[i] for i in sorted(calls)], saw_usage


def main() -> int:
    client = OpenAI(max_retries=0)
    messages: list[dict] = [
        {"role": "system", "content": "You are a weather assistant. Use the tools."},
        {"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]},
    ]
    for _ in range(10):
        text, tool_calls, saw_usage = stream_turn(client, messages)
        if not saw_usage:
            raise RuntimeError("stream ended without the usage chunk (include_usage)")
        if not tool_calls:
            print(text)
            return 0
        messages.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
        for call in tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": run_tool(call["function"]["name"], call["function"]["arguments"]),
                }
            )
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
