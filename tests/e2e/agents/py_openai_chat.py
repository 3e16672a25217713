"""Real agent: openai-python Chat Completions, non-streamed, hand-written tool loop.

Reads OPENAI_BASE_URL / OPENAI_API_KEY the way the SDK does and the task from FLOWPROOF_PROMPT.
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


def main() -> int:
    client = OpenAI(max_retries=0)
    messages: list[dict] = [
        {"role": "system", "content": "You are a weather assistant. Use the tools."},
        {"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]},
    ]
    for _ in range(10):
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            print(message.content)
            return 0
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": run_tool(call.function.name, call.function.arguments),
                }
            )
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
