"""Real agent: google-genai ``models.generate_content_stream``, hand-written tool loop.

``genai.Client()`` reads GOOGLE_GEMINI_BASE_URL (without /v1: the SDK appends
``/v1/models/<model>:streamGenerateContent?alt=sse``) and the key itself. The model's turn
is rebuilt from the streamed chunks (consecutive text fragments joined), as a streaming
agent does; automatic function calling is off.
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


def merged(parts: list[types.Part]) -> list[types.Part]:
    """Streamed parts with consecutive plain text fragments joined into one part."""
    out: list[types.Part] = []
    for part in parts:
        plain = part.text is not None and not part.thought and part.function_call is None
        if plain and out and out[-1].text is not None and not out[-1].thought:
            out[-1] = types.Part(text=(out[-1].text or "") + (part.text or ""))
        else:
            out.append(part)
    return out


def main() -> int:
    client = genai.Client()
    contents: list[types.Content] = [
        types.Content(
            role="user", parts=[types.Part.from_text(text=os.environ["FLOWPROOF_PROMPT"])]
        )
    ]
    for _ in range(10):
        parts: list[types.Part] = []
        streamed: list[str] = []
        for chunk in client.models.generate_content_stream(
            model=MODEL, contents=contents, config=CONFIG
        ):
            candidate = chunk.candidates[0] if chunk.candidates else None
            for part in (
                candidate.content.parts if candidate and candidate.content else None
            ) or []:
                parts.append(part)
                if part.text and not part.thought:
                    streamed.append(part.text)
        calls = [part.function_call for part in parts if part.function_call is not None]
        if not calls:
            print("".join(streamed))
            return 0
        contents.append(types.Content(role="model", parts=merged(parts)))
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
