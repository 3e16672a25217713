"""Real agent: anthropic-python's ``AnthropicVertex`` (Claude on Vertex AI), tool loop.

The client reads ANTHROPIC_VERTEX_BASE_URL (with /v1: it appends ``/projects/<p>/locations/
<region>/publishers/anthropic/models/<m>:rawPredict``), the project from
ANTHROPIC_VERTEX_PROJECT_ID and the region from CLOUD_ML_REGION, and authenticates with
Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS), refreshing them as it
loads them. AGENT_STREAM=1 streams (``messages.stream``, ``:streamRawPredict``).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any

from anthropic import AnthropicVertex

MODEL = os.environ.get("AGENT_MODEL", "claude-sonnet-4@20250514")
SYSTEM = "You are a weather assistant. Use the tools."
TOOLS: list[Any] = [
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


def run_tool(name: str, args: dict[str, Any]) -> str:
    if name == "get_weather":
        return json.dumps({"city": args["city"], "forecast": "sunny"})
    if name == "get_time":
        return json.dumps({"utc": datetime.datetime.now(datetime.UTC).isoformat()})
    raise ValueError(f"unknown tool {name!r}")


def main() -> int:
    client = AnthropicVertex(max_retries=0)
    messages: list[Any] = [{"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]}]
    for _ in range(10):
        request: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 1024,
            "system": SYSTEM,
            "messages": messages,
            "tools": TOOLS,
        }
        if os.environ.get("AGENT_STREAM") == "1":
            with client.messages.stream(**request) as stream:
                message = stream.get_final_message()
        else:
            message = client.messages.create(**request)
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
