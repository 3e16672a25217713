"""A Google ADK agent with one Python tool, run once by an in-memory runner.

ADK's Gemini model builds a `google.genai.Client`, which reads GOOGLE_GEMINI_BASE_URL and
GOOGLE_API_KEY (or GEMINI_API_KEY) when no Vertex AI project is configured.
"""

from __future__ import annotations

import asyncio
import os
import sys

from google.adk.agents import Agent
from google.adk.runners import InMemoryRunner
from google.genai import types


def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    return f"sunny, 24 C in {city}"


async def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    agent = Agent(
        name="weather_assistant",
        model="gemini-2.5-flash",
        instruction="You are a weather assistant. Use the tools.",
        tools=[get_weather],
    )
    runner = InMemoryRunner(agent=agent, app_name="weather")
    session = await runner.session_service.create_session(app_name="weather", user_id="user")
    message = types.Content(role="user", parts=[types.Part(text=task)])
    answer = ""
    async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            answer = "".join(part.text or "" for part in event.content.parts)
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
