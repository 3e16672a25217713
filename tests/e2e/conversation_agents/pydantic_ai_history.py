"""A support bot on pydantic-ai: each run gets the previous run's `all_messages()` as its
`message_history` (Chat Completions through OpenAIChatModel; its AsyncOpenAI client reads
OPENAI_BASE_URL).
"""

from __future__ import annotations

import os
from typing import Any

from openai import AsyncOpenAI
from orders import SYSTEM, converse, main_guarded, run_tool
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

model = OpenAIChatModel(
    os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
    provider=OpenAIProvider(openai_client=AsyncOpenAI(max_retries=0)),  # a failure fails at once
)
agent = Agent(model, instructions=SYSTEM)


@agent.tool_plain
def lookup_order(order_id: str) -> str:
    """Look up an order's delivery status.

    Args:
        order_id: The order number.
    """
    return run_tool("lookup_order", {"order_id": order_id})


@agent.tool_plain
def cancel_order(order_id: str) -> str:
    """Cancel an order. Destructive.

    Args:
        order_id: The order number.
    """
    return run_tool("cancel_order", {"order_id": order_id})


@agent.tool_plain
def issue_refund(order_id: str) -> str:
    """Refund an order in full. Destructive.

    Args:
        order_id: The order number.
    """
    return run_tool("issue_refund", {"order_id": order_id})


def main() -> int:
    history: list[Any] = []

    def answer(text: str) -> str:
        result = agent.run_sync(text, message_history=history)
        history[:] = result.all_messages()
        return str(result.output)

    return converse(answer)


if __name__ == "__main__":
    main_guarded(main)
