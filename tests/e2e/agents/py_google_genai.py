"""Real agent: google-genai ``models.generate_content``, non-streamed, hand-written tool loop.

``genai.Client()`` reads GOOGLE_GEMINI_BASE_URL (without /v1: the SDK appends
``/v1/models/<model>:generateContent``) and the key (GOOGLE_API_KEY, else GEMINI_API_KEY)
itself. Automatic function calling is off so every model turn is the agent's own.
google-genai retries nothing by default; GENAI_RETRY_ATTEMPTS set gives it HttpRetryOptions.
"""

from __future__ import annotations

import datetime
import os
import sys
from typing import Any

from google import genai
from google.genai import types

MODEL = os.environ.get("AGENT_MODEL", "gemini-2.5-flash")
SYSTEM = "You are a weather assistant. Use the tools."
TOOLS = [
    types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather",
                description="Current weather for a city.",
                parameters=types.Schema(
                    type=types.Type.OBJECT,
                    properties={"city": types.Schema(type=types.Type.STRING)},
                    required=["city"],
                ),
            ),
            types.FunctionDeclaration(name="get_time", description="The current UTC time."),
        ]
    )
]
CONFIG = types.GenerateContentConfig(
    system_instruction=SYSTEM,
    tools=TOOLS,
    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
)


def run_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "get_weather":
        return {"city": args["city"], "forecast": "sunny"}
    if name == "get_time":
        return {"utc": datetime.datetime.now(datetime.UTC).isoformat()}
    raise ValueError(f"unknown tool {name!r}")


def main() -> int:
    attempts = os.environ.get("GENAI_RETRY_ATTEMPTS")
    retry = (
        types.HttpRetryOptions(attempts=int(attempts), initial_delay=0.1, max_delay=0.5)
        if attempts
        else None
    )
    client = genai.Client(http_options=types.HttpOptions(retry_options=retry))
    contents: list[types.Content] = [
        types.Content(
            role="user", parts=[types.Part.from_text(text=os.environ["FLOWPROOF_PROMPT"])]
        )
    ]
    for _ in range(10):
        response = client.models.generate_content(model=MODEL, contents=contents, config=CONFIG)
        calls = response.function_calls or []
        if not calls:
            print(response.text)
            return 0
        assert response.candidates and response.candidates[0].content
        contents.append(response.candidates[0].content)
        contents.append(
            types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=call.id,
                            name=call.name,
                            response=run_tool(str(call.name), dict(call.args or {})),
                        )
                    )
                    for call in calls
                ],
            )
        )
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
