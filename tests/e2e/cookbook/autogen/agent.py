"""An AutoGen AssistantAgent with one Python tool, on autogen-ext's OpenAI chat client.

`OpenAIChatCompletionClient(model=...)` without `base_url` builds a plain
`openai.AsyncOpenAI()`, which reads OPENAI_BASE_URL and OPENAI_API_KEY.
`reflect_on_tool_use=True` makes a second model call that turns the tool's result into
the answer (without it the answer is the tool's output, as text).
"""

from __future__ import annotations

import asyncio
import os
import sys

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient


async def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny, 24 C in {city}"


async def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    model_client = OpenAIChatCompletionClient(model="gpt-4o-mini")
    agent = AssistantAgent(
        name="weather_assistant",
        model_client=model_client,
        tools=[get_weather],
        system_message="You are a weather assistant. Use the tools.",
        reflect_on_tool_use=True,
    )
    result = await agent.run(task=task)
    await model_client.close()
    print(result.messages[-1].to_text())
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
