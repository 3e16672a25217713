"""The same support bot on the `anthropic` SDK: Messages API, history kept, tool_use loop.

The SDK reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY itself.
"""

from __future__ import annotations

import os
from typing import Any

from anthropic import Anthropic
from orders import DESCRIPTIONS, ORDER_SCHEMA, STATUS, SYSTEM, converse, main_guarded, run_tool

TOOLS = [
    {"name": name, "description": DESCRIPTIONS[name], "input_schema": ORDER_SCHEMA}
    for name in STATUS
]


def main() -> int:
    client = Anthropic(max_retries=0)
    model = os.environ.get("AGENT_MODEL", "claude-sonnet-4-5")
    messages: list[dict[str, Any]] = []

    def answer(text: str) -> str:
        messages.append({"role": "user", "content": text})
        for _ in range(10):
            response = client.messages.create(
                model=model, max_tokens=1024, system=SYSTEM, messages=messages, tools=TOOLS
            )
            content = [block.model_dump(exclude_none=True) for block in response.content]
            messages.append({"role": "assistant", "content": content})
            uses = [block for block in response.content if block.type == "tool_use"]
            if not uses:
                return "".join(block.text for block in response.content if block.type == "text")
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": run_tool(use.name, use.input),
                }
                for use in uses
            ]
            messages.append({"role": "user", "content": results})
        raise RuntimeError("no answer after 10 model calls")

    return converse(answer)


if __name__ == "__main__":
    main_guarded(main)
