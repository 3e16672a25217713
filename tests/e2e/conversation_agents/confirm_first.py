"""A human-in-the-loop support bot: it asks "Shall I go ahead?" before a destructive tool.

Its system prompt tells the model to ask for confirmation first, and its code holds the line
too: a destructive tool the model asks for runs only when the user's message of that turn is
a yes; otherwise the model gets a refusal as the tool's result. So "no" never cancels.
"""

from __future__ import annotations

import json
from typing import Any

from openai import OpenAI
from orders import (
    DESTRUCTIVE,
    SYSTEM,
    chat_tools,
    chat_turn,
    converse,
    is_yes,
    main_guarded,
    run_tool,
)

CONFIRM = " Before you cancel an order or issue a refund, ask the user to confirm."


def main() -> int:
    client = OpenAI(max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM + CONFIRM}]

    def answer(text: str) -> str:
        confirmed = is_yes(text)

        def call(name: str, arguments: str) -> str:
            if name in DESTRUCTIVE and not confirmed:
                return json.dumps({"error": "not done: the user has not confirmed"})
            return run_tool(name, arguments)

        messages.append({"role": "user", "content": text})
        return chat_turn(client, messages, chat_tools(), call)

    return converse(answer)


if __name__ == "__main__":
    main_guarded(main)
