"""An agent shaped like a coding CLI: its requests change on every run and every machine.

Each request carries what real coding agents put there (see docs/agents.md): the working
directory and today's date in the system prompt, and a fresh session id inside a JSON string
in `metadata`. Otherwise it is the weather agent: the openai SDK in a tool loop, pointed at
wherever OPENAI_BASE_URL says. Its task is its first argument.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from datetime import date
from typing import Any

from openai import OpenAI

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def get_weather(city: str) -> dict[str, Any]:
    return {"city": city, "forecast": "sunny", "temp_c": 24}


def main() -> int:
    prompt = " ".join(sys.argv[1:])
    client = OpenAI(api_key=os.environ.get("OPENAI_API_KEY") or "unused-offline")
    system = (
        "You are a weather assistant working in a project folder.\n"
        f"Working directory: {os.getcwd()}\n"
        f"Home: {os.path.expanduser('~')}\n"
        f"Today's date is {date.today().isoformat()}.\n"
        "Use the tools, then answer in one short sentence."
    )
    client_info = json.dumps({"client": "session-agent", "session_id": str(uuid.uuid4())})
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": prompt},
    ]
    for _ in range(4):
        completion = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=messages,
            tools=TOOLS,
            metadata={"client_info": client_info},
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            print((message.content or "").strip())
            return 0
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            if call.type != "function":
                continue
            result = get_weather(**json.loads(call.function.arguments or "{}"))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    print("session_agent: no answer after 4 rounds", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
