"""A small real tool-calling agent: the openai SDK (Chat Completions) in a tool loop.

The task comes from the environment variable FLOWPROOF_PROMPT (fallback: the command-line
arguments), the model from AGENT_MODEL (default gpt-4o-mini). The client is a plain
`OpenAI()`, so OPENAI_BASE_URL from the environment decides where model calls go: the real
API, or flowproof's recording/replaying proxy.

The agent offers three tools and runs them as real Python functions:
  get_weather(city)  a small fixed forecast
  get_time()         the CURRENT time, deliberately different on every run
  delete_city(city)  must never be called: it raises
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from openai import OpenAI

MAX_ROUNDS = 8

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Nairobi"}
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the current date and time (UTC, ISO 8601).",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "delete_city",
            "description": "Permanently delete a city from the database. Never needed for "
            "weather questions.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
]


def get_weather(city: str) -> dict[str, Any]:
    return {"city": city, "forecast": "sunny", "temp_c": 24}


def get_time() -> dict[str, Any]:
    return {"now": datetime.now(UTC).isoformat()}


def delete_city(city: str) -> dict[str, Any]:
    raise RuntimeError(f"delete_city({city!r}) must never be called by this agent")


IMPLEMENTATIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "get_weather": get_weather,
    "get_time": get_time,
    "delete_city": delete_city,
}


def run_tool(name: str, arguments: str) -> str:
    """Run one requested tool; unknown tools and bad arguments become an error result."""
    function = IMPLEMENTATIONS.get(name)
    if function is None:
        return json.dumps({"error": f"unknown tool {name!r}"})
    try:
        kwargs = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as error:
        return json.dumps({"error": f"arguments are not JSON: {error}"})
    if not isinstance(kwargs, dict):
        return json.dumps({"error": "arguments must be a JSON object"})
    try:
        return json.dumps(function(**kwargs))
    except TypeError as error:
        return json.dumps({"error": f"bad arguments: {error}"})


def main() -> int:
    prompt = os.environ.get("FLOWPROOF_PROMPT") or " ".join(sys.argv[1:])
    if not prompt.strip():
        print("usage: FLOWPROOF_PROMPT='...' python weather_agent.py  (or pass it as args)")
        return 2
    model = os.environ.get("AGENT_MODEL", "gpt-4o-mini")
    # No base_url: OPENAI_BASE_URL steers the client. Replays run offline and need no key.
    client = OpenAI() if os.environ.get("OPENAI_API_KEY") else OpenAI(api_key="unused-offline")

    messages: list[Any] = [
        {
            "role": "system",
            "content": "You are a weather assistant. Use the tools to answer, then reply "
            "with one short sentence.",
        },
        {"role": "user", "content": prompt},
    ]
    for _ in range(MAX_ROUNDS):
        completion = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = completion.choices[0].message
        if not message.tool_calls:
            print((message.content or "").strip())
            return 0
        calls = [call for call in message.tool_calls if call.type == "function"]
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                    for call in calls
                ],
            }
        )
        for call in calls:
            result = run_tool(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    print(f"weather_agent: no final answer after {MAX_ROUNDS} rounds", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
