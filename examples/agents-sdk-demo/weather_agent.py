"""Real agent: the OpenAI Agents SDK streamed (``Runner.run_streamed`` + ``stream_events()``).

Default model = the Responses API (streamed); tracing disabled.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sys

from agents import Agent, Runner, function_tool, set_tracing_disabled
from openai.types.responses import ResponseTextDeltaEvent

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
    result = Runner.run_streamed(agent, os.environ["FLOWPROOF_PROMPT"], max_turns=10)
    tool_outputs = 0
    deltas: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            deltas.append(event.data.delta)
        elif event.type == "run_item_stream_event" and event.name == "tool_output":
            tool_outputs += 1
    if not tool_outputs:
        raise RuntimeError("the run finished without calling a tool")
    if "".join(deltas) != result.final_output:
        raise RuntimeError("streamed text deltas disagree with the final output")
    print(result.final_output)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
