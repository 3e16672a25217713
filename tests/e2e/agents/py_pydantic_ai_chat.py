"""Real agent: pydantic-ai ``Agent(...).run_sync`` with tools over Chat Completions (``OpenAIChatModel``).

The default OpenAIProvider reads OPENAI_BASE_URL / OPENAI_API_KEY from the environment.
"""

from __future__ import annotations

import datetime
import os
import sys

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")

agent = Agent(
    OpenAIChatModel(MODEL),
    instructions="You are a weather assistant. Use the tools.",
)


@agent.tool_plain
def get_weather(city: str) -> dict:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    return {"city": city, "forecast": "sunny"}


@agent.tool_plain
def get_time() -> str:
    """The current UTC time."""
    return datetime.datetime.now(datetime.UTC).isoformat()


def main() -> int:
    result = agent.run_sync(os.environ["FLOWPROOF_PROMPT"])
    print(result.output)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
