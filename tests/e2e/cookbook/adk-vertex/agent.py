"""A Google ADK agent on Vertex AI, with one Python tool, run once by an in-memory runner.

The model is given its own `google.genai.Client` built with the project and location in
code: google-genai reads GOOGLE_VERTEX_BASE_URL then, and authenticates with Application
Default Credentials (GOOGLE_APPLICATION_CREDENTIALS). ADK's own client, configured from the
environment alone, would send its calls without their path.
"""

from __future__ import annotations

import asyncio
import os
import sys

from google import genai
from google.adk.agents import Agent
from google.adk.models.google_llm import Gemini
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
    client = genai.Client(
        vertexai=True,
        project=os.environ["GOOGLE_CLOUD_PROJECT"],
        location=os.environ["GOOGLE_CLOUD_LOCATION"],
    )
    agent = Agent(
        name="weather_assistant",
        model=Gemini(model="gemini-2.5-flash", client=client),
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
