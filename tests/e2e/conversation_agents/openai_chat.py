"""A plain openai-SDK support bot: Chat Completions, its history a list it keeps, a tool loop.

The `input("> ")` form of the line protocol (orders.py): a prompt at start, so its flows
declare `wait_first: true`. AGENT_FORGET=1 (a deliberate bug) drops the history before each
message: the model then cannot know which order "cancel it" means.
"""

from __future__ import annotations

import os
from typing import Any

from openai import OpenAI
from orders import SYSTEM, chat_tools, chat_turn, converse, main_guarded


def main() -> int:
    client = OpenAI(max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]

    def answer(text: str) -> str:
        if os.environ.get("AGENT_FORGET"):
            del messages[1:]
        messages.append({"role": "user", "content": text})
        return chat_turn(client, messages, chat_tools())

    return converse(answer, prompt_first=True)


if __name__ == "__main__":
    main_guarded(main)
