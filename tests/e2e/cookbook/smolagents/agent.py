"""A smolagents ToolCallingAgent with one tool, on OpenAI-compatible Chat Completions.

`OpenAIServerModel` without `api_base` builds a plain `openai.OpenAI()`, which reads
OPENAI_BASE_URL and OPENAI_API_KEY. The run ends on the model's `final_answer` tool call.
"""

from __future__ import annotations

import os
import sys

from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    return f"sunny, 24 C in {city}"


def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    model = OpenAIServerModel(model_id="gpt-4o-mini")
    agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=4, verbosity_level=0)
    print(agent.run(task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
