"""A support bot that holds a conversation: the openai SDK, its history a list it keeps.

It reads one message per line on stdin, answers (calling its order tools as the model asks),
prints the answer and then `> ` when it is ready for the next message, and exits at the end
of its input. It remembers the conversation, so "cancel it" means the order named before.
"""

from __future__ import annotations

import json
from typing import Any

from openai import OpenAI

SYSTEM = "You are a support agent for an online shop. Use the tools to act on orders."
STATUS = {"lookup_order": "shipped", "cancel_order": "cancelled"}
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ').capitalize()} by its number.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
    for name in STATUS
]


def answer(client: OpenAI, history: list[Any], message: str) -> str:
    """One turn: the message, the model's tool calls run, until it answers in words."""
    history.append({"role": "user", "content": message})
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=history, tools=TOOLS)
        said = reply.choices[0].message
        history.append(said.model_dump(exclude_none=True))
        if not said.tool_calls:
            return said.content or ""
        for call in said.tool_calls:
            order = json.loads(call.function.arguments).get("order_id")  # type: ignore[union-attr]
            result = {"order_id": order, "status": STATUS[call.function.name]}  # type: ignore[union-attr]
            history.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})


def main() -> int:
    client = OpenAI(max_retries=0)
    history: list[Any] = [{"role": "system", "content": SYSTEM}]
    while True:
        try:
            message = input("> ")
        except EOFError:
            return 0
        print(answer(client, history, message))


if __name__ == "__main__":
    raise SystemExit(main())
