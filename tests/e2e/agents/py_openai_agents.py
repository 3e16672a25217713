"""Real agent: the OpenAI Agents SDK (``Runner.run``), default model = the Responses API.

The SDK's OpenAI client reads OPENAI_BASE_URL / OPENAI_API_KEY; tracing is disabled (it would
otherwise post to the real OpenAI trace endpoint).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sys

from agents import Agent, Runner, function_tool, set_tracing_disabled

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")


@function_tool
def get_weather(city: str) -> dict:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    return {"city": city, "forecast": "sunny"}


@function_tool
def get_time() -> str:
    """The current UTC time."""
    return datetime.datetime.now(datetime.UTC).isoformat()


async def main() -> int:
    set_tracing_disabled(True)
    agent = Agent(
        name="weather",
        instructions="You are a weather assistant. Use the tools.",
        model=MODEL,
        tools=[get_weather, get_time],
    )
    result = await Runner.run(agent, os.environ["FLOWPROOF_PROMPT"], max_turns=10)
    print(result.final_output)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
