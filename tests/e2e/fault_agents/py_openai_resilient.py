"""Real agent for faults: openai-python Chat Completions, a weather tool loop whose client
is set from its environment, so one script shows each way an agent meets a fault.

AGENT_RETRIES: `default` (the SDK's own retries) or a number; AGENT_TIMEOUT: the client's
timeout in seconds; AGENT_STREAM=1 streams each call; ON_CUT: what it does with a stream
that ends without its finish reason: `retry` (the identical request again, twice at most)
or `accept` (the text so far is the answer, the bug this flow catches).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

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


def client() -> OpenAI:
    options: dict[str, Any] = {}
    retries = os.environ.get("AGENT_RETRIES", "default")
    if retries != "default":
        options["max_retries"] = int(retries)
    if os.environ.get("AGENT_TIMEOUT"):
        options["timeout"] = float(os.environ["AGENT_TIMEOUT"])
    return OpenAI(**options)


def run_tool(name: str, arguments: str) -> str:
    args = json.loads(arguments or "{}")
    if name == "get_weather":
        return json.dumps({"city": args["city"], "forecast": "sunny"})
    if name == "get_time":
        return json.dumps({"utc": "2026-01-01T09:00:00Z"})
    raise ValueError(f"unknown tool {name!r}")


def streamed(model: OpenAI, messages: list[dict[str, Any]]) -> tuple[str, list[dict], bool]:
    """One streamed call: (text, tool calls, whether it ended with a finish reason)."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finished = False
    stream = model.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, stream=True)
    for chunk in stream:
        for choice in chunk.choices:
            finished = finished or choice.finish_reason is not None
            if choice.delta.content:
                text.append(choice.delta.content)
            for part in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    part.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = part.id or call["id"]
                if part.function and part.function.name:
                    call["function"]["name"] += part.function.name
                if part.function and part.function.arguments:
                    call["function"]["arguments"] += part.function.arguments
    return "".join(text), [calls[i] for i in sorted(calls)], finished


def one_call(model: OpenAI, messages: list[dict[str, Any]]) -> tuple[str, list[dict]]:
    if os.environ.get("AGENT_STREAM") != "1":
        message = model.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        answer = message.choices[0].message
        calls = [call.model_dump() for call in answer.tool_calls or []]
        return answer.content or "", calls
    for attempt in range(3):
        text, calls, finished = streamed(model, messages)
        if finished or os.environ.get("ON_CUT") == "accept":
            return text, calls
        print(f"the stream was cut (attempt {attempt + 1}); trying again", file=sys.stderr)
    raise RuntimeError("every stream was cut")


def main() -> int:
    model = client()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a weather assistant. Use the tools."},
        {"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]},
    ]
    for _ in range(10):
        text, calls = one_call(model, messages)
        if not calls:
            print(text)
            return 0
        messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        for call in calls:
            result = run_tool(call["function"]["name"], call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
