"""Real agent: google-genai on Vertex AI (`vertexai=True`), hand-written tool loop.

``genai.Client(vertexai=True, project=..., location=...)`` reads GOOGLE_VERTEX_BASE_URL
(without /v1: the SDK appends ``/v1beta1/projects/<p>/locations/<l>/publishers/google/
models/<m>:generateContent``) and authenticates with Application Default Credentials
(GOOGLE_APPLICATION_CREDENTIALS), sending the access token as a bearer. The project and
location are passed explicitly: google-genai drops the request path for a custom base URL
when they come from the environment alone. AGENT_STREAM=1 streams
(``:streamGenerateContent?alt=sse``). Automatic function calling is off.
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


def answer(client: genai.Client, contents: list[types.Content]) -> types.Content:
    """One model turn, as one Content (streamed chunks' parts joined, text fragments merged)."""
    if os.environ.get("AGENT_STREAM") != "1":
        response = client.models.generate_content(model=MODEL, contents=contents, config=CONFIG)
        assert response.candidates and response.candidates[0].content
        return response.candidates[0].content
    parts: list[types.Part] = []
    for chunk in client.models.generate_content_stream(
        model=MODEL, contents=contents, config=CONFIG
    ):
        for candidate in chunk.candidates or []:
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.text is not None and parts and parts[-1].text is not None:
                    parts[-1] = types.Part(text=(parts[-1].text or "") + part.text)
                else:
                    parts.append(part)
    return types.Content(role="model", parts=parts)


def main() -> int:
    client = genai.Client(
        vertexai=True,
        project=os.environ["AGENT_PROJECT"],
        location=os.environ.get("AGENT_LOCATION", "us-central1"),
    )
    contents: list[types.Content] = [
        types.Content(
            role="user", parts=[types.Part.from_text(text=os.environ["FLOWPROOF_PROMPT"])]
        )
    ]
    for _ in range(10):
        turn = answer(client, contents)
        calls = [part.function_call for part in turn.parts or [] if part.function_call]
        if not calls:
            print("".join(part.text or "" for part in turn.parts or []))
            return 0
        contents.append(turn)
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
