"""A LlamaIndex FunctionAgent (agent workflow) with one Python tool, on the OpenAI LLM.

llama-index-llms-openai reads OPENAI_API_BASE (not OPENAI_BASE_URL) and OPENAI_API_KEY.
"""

from __future__ import annotations

import asyncio
import os
import sys

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.openai import OpenAI


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny, 24 C in {city}"


async def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    agent = FunctionAgent(
        tools=[get_weather],
        llm=OpenAI(model="gpt-4o-mini"),
        system_prompt="You are a weather assistant. Use the tools.",
    )
    response = await agent.run(task)
    print(response)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
