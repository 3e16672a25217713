"""A support bot on the OpenAI Agents SDK: its memory is a `SQLiteSession` (in memory).

Each message is one `Runner.run(agent, message, session=session)`: the session, not this
code, carries the earlier turns into the next request (the Responses API, the SDK's
default). No retries: a failed call fails the turn at once. One event loop for the whole conversation: the SDK's client keeps its
connections across turns.
"""

from __future__ import annotations

import asyncio
import os

from agents import (
    Agent,
    Runner,
    SQLiteSession,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from orders import SYSTEM, converse, main_guarded, run_tool


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order's delivery status.

    Args:
        order_id: The order number.
    """
    return run_tool("lookup_order", {"order_id": order_id})


@function_tool
def cancel_order(order_id: str) -> str:
    """Cancel an order. Destructive.

    Args:
        order_id: The order number.
    """
    return run_tool("cancel_order", {"order_id": order_id})


@function_tool
def issue_refund(order_id: str) -> str:
    """Refund an order in full. Destructive.

    Args:
        order_id: The order number.
    """
    return run_tool("issue_refund", {"order_id": order_id})


def main() -> int:
    set_tracing_disabled(True)
    set_default_openai_client(AsyncOpenAI(max_retries=0), use_for_tracing=False)
    agent = Agent(
        name="support",
        instructions=SYSTEM,
        model=os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
        tools=[lookup_order, cancel_order, issue_refund],
    )
    session = SQLiteSession("support-conversation")  # db_path defaults to ":memory:"
    loop = asyncio.new_event_loop()

    def answer(text: str) -> str:
        result = loop.run_until_complete(Runner.run(agent, text, session=session, max_turns=10))
        return str(result.final_output)

    try:
        return converse(answer)
    finally:
        session.close()
        loop.close()


if __name__ == "__main__":
    main_guarded(main)
