"""A conversational agent for the falsifiability cases: an openai-SDK chat loop with history
and two tools (`lookup_order`, `cancel_order`), one message per stdin line, `> ` when ready.

Knobs, each a code change the conversation's verdicts must catch:
ORDER_CHAT_NO_PROMPT_AFTER=N: after answering turn N it prints no prompt (a turn that never
ends); ORDER_CHAT_EXIT_AFTER=N: it exits after turn N (0: before the first);
ORDER_CHAT_LINGER=1: at end of input it does not exit."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from openai import OpenAI

TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} by its id",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "integer"}},
                "required": ["order_id"],
            },
        },
    }
    for name in ("lookup_order", "cancel_order")
]


def run_tool(name: str, arguments: str) -> str:
    order = json.loads(arguments).get("order_id")
    state = "shipped" if name == "lookup_order" else "cancelled"
    return json.dumps({"order_id": order, "state": state})


def main() -> int:
    client = OpenAI(max_retries=0)
    history: list[Any] = [{"role": "system", "content": "You are a shop's support bot."}]
    silent_after = int(os.environ.get("ORDER_CHAT_NO_PROMPT_AFTER", "0"))
    exit_after = int(os.environ.get("ORDER_CHAT_EXIT_AFTER", "-1"))
    turn = 0
    while True:
        if turn == exit_after:
            return 0
        try:
            line = input("" if silent_after and turn >= silent_after else "> ")
        except EOFError:
            if os.environ.get("ORDER_CHAT_LINGER"):
                time.sleep(60)
            return 0
        turn += 1
        history.append({"role": "user", "content": line})
        while True:
            reply = (
                client.chat.completions.create(model="gpt-4o-mini", messages=history, tools=TOOLS)
                .choices[0]
                .message
            )
            history.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                result = run_tool(call.function.name, call.function.arguments)  # type: ignore[union-attr]
                history.append({"role": "tool", "tool_call_id": call.id, "content": result})
        print(f"bot: {reply.content}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
