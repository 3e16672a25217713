"""Real agent: langchain-openai ``ChatOpenAI(...).bind_tools([...])`` loop with ToolMessages.

ChatOpenAI reads OPENAI_API_BASE, then OPENAI_BASE_URL, and OPENAI_API_KEY (Chat Completions).
"""

from __future__ import annotations

import datetime
import os
import sys

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")


@tool
def get_weather(city: str) -> dict:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    return {"city": city, "forecast": "sunny"}


@tool
def get_time() -> str:
    """The current UTC time."""
    return datetime.datetime.now(datetime.UTC).isoformat()


TOOLS = {t.name: t for t in (get_weather, get_time)}


def main() -> int:
    model = ChatOpenAI(model=MODEL, max_retries=0).bind_tools(list(TOOLS.values()))
    messages: list = [
        SystemMessage("You are a weather assistant. Use the tools."),
        HumanMessage(os.environ["FLOWPROOF_PROMPT"]),
    ]
    for _ in range(10):
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            print(reply.text)
            return 0
        for call in reply.tool_calls:
            result: ToolMessage = TOOLS[call["name"]].invoke(call)
            messages.append(result)
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
