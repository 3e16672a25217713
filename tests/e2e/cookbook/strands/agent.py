"""A Strands agent with one tool, on Strands' OpenAI model provider (Chat Completions).

`OpenAIModel` without `client_args` builds a plain `openai.AsyncOpenAI()`, which reads
OPENAI_BASE_URL and OPENAI_API_KEY. (Strands' default provider is Amazon Bedrock.)
"""

from __future__ import annotations

import os
import sys

from strands import Agent, tool
from strands.models.openai import OpenAIModel


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    return f"sunny, 24 C in {city}"


def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    agent = Agent(
        model=OpenAIModel(model_id="gpt-4o-mini"),
        tools=[get_weather],
        system_prompt="You are a weather assistant. Use the tools.",
        callback_handler=None,  # the default handler prints the streamed text as it comes
    )
    print(agent(task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
