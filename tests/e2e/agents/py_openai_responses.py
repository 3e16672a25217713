"""Real agent: openai-python Responses API, non-streamed, sending the FULL history each turn.

The output items of every response (function_call items included) are appended to the input
list, followed by function_call_output items; no previous_response_id.
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
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    },
    {
        "type": "function",
        "name": "get_time",
        "description": "The current UTC time.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        "strict": True,
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
    items: list = [{"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]}]
    for _ in range(10):
        response = client.responses.create(
            model=MODEL,
            instructions="You are a weather assistant. Use the tools.",
            input=items,
            tools=TOOLS,
        )
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            print(response.output_text)
            return 0
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        for call in calls:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": run_tool(call.name, call.arguments),
                }
            )
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
