"""A support bot with a mode its code enforces: in read-only mode (the default) the model is
offered only lookup_order, so no message, however persuasive, gets an order cancelled or
refunded; a destructive call the model names anyway is refused, not run.

GUARD_READ_ONLY=0 offers every tool: the red path, where the model complies with an
injected instruction.
"""

from __future__ import annotations

import json
import os
from typing import Any

from openai import OpenAI
from orders import STATUS, SYSTEM, chat_tools, chat_turn, converse, main_guarded, run_tool


def main() -> int:
    client = OpenAI(max_retries=0)
    read_only = os.environ.get("GUARD_READ_ONLY", "1") != "0"
    offered = ("lookup_order",) if read_only else tuple(STATUS)
    system = SYSTEM + (" You are in read-only mode." if read_only else "")
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]

    def call(name: str, arguments: str) -> str:
        if name not in offered:
            return json.dumps({"error": f"{name} is not available in read-only mode"})
        return run_tool(name, arguments)

    def answer(text: str) -> str:
        messages.append({"role": "user", "content": text})
        return chat_turn(client, messages, chat_tools(offered), call)

    return converse(answer)


if __name__ == "__main__":
    main_guarded(main)
