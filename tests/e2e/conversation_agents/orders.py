"""What the conversational agents share: the order tools and the line protocol.

An agent here reads one user message per stdin line, answers it (any number of model calls),
prints its reply and then a turn-end prompt `> `, keeps its history across messages, and
exits 0 at the end of stdin. The prompt comes in two forms, both a flow's `until: '^> $'`
matches: `input("> ")` writes it unterminated, once at start and after every reply (the flow
declares `wait_first: true`); `print("> ")` writes the line after every reply only.

The tools answer from the order number alone, so a recording is a function of the messages:
lookup_order says shipped, cancel_order cancelled, issue_refund refunded. ORDERS_LOG (a file
path, optional) gets one line per executed tool call: replay runs the agent's real code, so
the log shows which tools ran, and an MCP server's log shows it was never started.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

STATUS = {"lookup_order": "shipped", "cancel_order": "cancelled", "issue_refund": "refunded"}
DESTRUCTIVE = ("cancel_order", "issue_refund")
DESCRIPTIONS = {
    "lookup_order": "Look up an order's delivery status.",
    "cancel_order": "Cancel an order. Destructive.",
    "issue_refund": "Refund an order in full. Destructive.",
}
ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "description": "The order number."}},
    "required": ["order_id"],
}
SYSTEM = "You are a support agent for an online shop. Use the tools to act on orders."
_YES = re.compile(r"^\W*(yes|yep|sure|go ahead)\b", re.IGNORECASE)


def log_call(name: str, order_id: str) -> None:
    if path := os.environ.get("ORDERS_LOG"):
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{name} {order_id}\n")


def run_tool(name: str, arguments: str | dict[str, Any]) -> str:
    """Execute one order tool; its result as JSON text."""
    args = json.loads(arguments or "{}") if isinstance(arguments, str) else arguments
    if name not in STATUS:
        return json.dumps({"error": f"unknown tool {name}"})
    order_id = str(args.get("order_id", ""))
    log_call(name, order_id)
    return json.dumps({"order_id": order_id, "status": STATUS[name]})


def is_yes(text: str) -> bool:
    return _YES.search(text) is not None


def chat_tools(names: tuple[str, ...] = tuple(STATUS)) -> list[dict[str, Any]]:
    """The tools as Chat Completions declarations."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": DESCRIPTIONS[name],
                "parameters": ORDER_SCHEMA,
            },
        }
        for name in names
    ]


def chat_turn(
    client: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    call: Callable[[str, str], str] = run_tool,
    model: str | None = None,
) -> str:
    """Answer the last user message of `messages` (appending every step to it): the
    openai-SDK Chat Completions tool loop, until the model answers in text."""
    for _ in range(10):
        response = client.chat.completions.create(
            model=model or os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
            messages=messages,
            tools=tools,
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return str(message.content or "")
        for tool_call in message.tool_calls:
            result = call(tool_call.function.name, tool_call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": result})
    raise RuntimeError("no answer after 10 model calls")


def converse(answer: Callable[[str], str], *, prompt_first: bool = False) -> int:
    """The line protocol: each stdin line is a message; `answer` replies to it; `> ` ends
    the turn. `prompt_first`: the `input("> ")` form (a prompt at start, unterminated).

    Two deliberate faults for the red paths: CONVERSE_EXIT_AFTER=N exits 0 after N answers
    (an agent that quits mid-conversation); CONVERSE_DEAF=1 greets and then never reads
    stdin (an agent written for one turn, waiting on something else)."""
    if os.environ.get("CONVERSE_DEAF"):
        print("Hello! How can I help?", flush=True)
        time.sleep(3600)
        return 0
    exit_after = int(os.environ.get("CONVERSE_EXIT_AFTER") or 0)
    answered = 0
    while not exit_after or answered < exit_after:
        if prompt_first:
            try:
                message = input("> ")
            except EOFError:
                return 0
        else:
            line = sys.stdin.readline()
            if not line:
                return 0
            message = line.rstrip("\n")
        print(answer(message), flush=True)
        answered += 1
        if not prompt_first:
            print("> ", flush=True)
    if prompt_first:
        print("> ", end="", flush=True)  # the prompt of a message it will never read
    return 0


def main_guarded(main: Callable[[], int]) -> None:
    """Run `main` and exit with its code; an error is one line on stderr, exit 1."""
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
