"""Real agent with two providers: it plans with OpenAI (Chat Completions, a tool loop) and
writes the answer with Anthropic (Messages), each through its own SDK. The clients read
OPENAI_BASE_URL / OPENAI_API_KEY and ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY themselves."""

from __future__ import annotations

import json
import os
import sys

from anthropic import Anthropic
from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def plan(task: str) -> str:
    """The planner: OpenAI calls the weather tool until it has an answer."""
    client = OpenAI(max_retries=0)
    messages: list[dict] = [
        {"role": "system", "content": "You plan. Use the tools."},
        {"role": "user", "content": task},
    ]
    for _ in range(5):
        message = (
            client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
            .choices[0]
            .message
        )
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            city = json.loads(call.function.arguments)["city"]
            result = json.dumps({"city": city, "forecast": "sunny"})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise RuntimeError("the planner gave no answer")


def write(notes: str) -> str:
    """The writer: Anthropic turns the plan into the reply."""
    client = Anthropic(max_retries=0)
    message = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=200,
        system="You write the final answer.",
        messages=[{"role": "user", "content": f"Write it up: {notes}"}],
    )
    return "".join(block.text for block in message.content if block.type == "text")


if __name__ == "__main__":
    try:
        print(write(plan(os.environ["FLOWPROOF_PROMPT"])))
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
