"""A one-agent CrewAI crew with one tool; CrewAI's native OpenAI provider calls the model.

`LLM(model="gpt-4o-mini")` reads OPENAI_BASE_URL (then OPENAI_API_BASE) and OPENAI_API_KEY.
"""

from __future__ import annotations

import os
import sys

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool


@tool("get_weather")
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny, 24 C in {city}"


def main() -> int:
    task_text = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    forecaster = Agent(
        role="Weather assistant",
        goal="Answer weather questions from the get_weather tool",
        backstory="You report the current weather in one sentence.",
        tools=[get_weather],
        llm=LLM(model="gpt-4o-mini"),
    )
    task = Task(description=task_text, expected_output="One sentence.", agent=forecaster)
    print(Crew(agents=[forecaster], tasks=[task]).kickoff().raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
