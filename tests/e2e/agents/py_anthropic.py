"""Real agent: anthropic-python Messages API (``messages.create``), non-streamed tool loop.

The SDK reads ANTHROPIC_BASE_URL (without /v1) and ANTHROPIC_API_KEY itself. No retries,
unless AGENT_RETRIES says how many (`default`: the SDK's own).
"""

from __future__ import annotations

import datetime
import json
import os
import sys

from anthropic import Anthropic

MODEL = os.environ.get("AGENT_MODEL", "claude-sonnet-4-6")
TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "name": "get_time",
        "description": "The current UTC time.",
        "input_schema": {"type": "object", "properties": {}},
    },
]


def run_tool(name: str, args: dict) -> str:
    if name == "get_weather":
        return json.dumps({"city": args["city"], "forecast": "sunny"})
    if name == "get_time":
        return json.dumps({"utc": datetime.datetime.now(datetime.UTC).isoformat()})
    raise ValueError(f"unknown tool {name!r}")


def main() -> int:
    retries = os.environ.get("AGENT_RETRIES", "0")
    client = Anthropic() if retries == "default" else Anthropic(max_retries=int(retries))
    messages: list[dict] = [{"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]}]
    for _ in range(10):
        message = client.messages.create(
            model=MODEL,
            max_tokens=1024,
            system="You are a weather assistant. Use the tools.",
            messages=messages,
            tools=TOOLS,
        )
        messages.append({"role": "assistant", "content": message.content})
        uses = [block for block in message.content if block.type == "tool_use"]
        if message.stop_reason != "tool_use" or not uses:
            print("".join(block.text for block in message.content if block.type == "text"))
            return 0
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "content": run_tool(use.name, dict(use.input)),
                    }
                    for use in uses
                ],
            }
        )
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
