"""A local model through Ollama's native API: the `ollama` client's `chat` with one tool.

`ollama.Client()` reads OLLAMA_HOST (the server, without `/api`); a local Ollama takes no
key. Tool results go back as `tool` messages named by `tool_name`.
"""

from __future__ import annotations

import os
import sys

import ollama

MODEL = "llama3.2"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city."}},
                "required": ["city"],
            },
        },
    }
]


def get_weather(city: str) -> str:
    return f"sunny, 24 C in {city}"


def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    client = ollama.Client()
    messages: list = [
        {"role": "system", "content": "You are a weather assistant. Use the tools."},
        {"role": "user", "content": task},
    ]
    for _ in range(5):
        message = client.chat(model=MODEL, messages=messages, tools=TOOLS).message
        messages.append(message)  # the client takes its own Message objects back
        if not message.tool_calls:
            print(message.content)
            return 0
        for call in message.tool_calls:
            result = get_weather(**call.function.arguments)
            messages.append({"role": "tool", "tool_name": call.function.name, "content": result})
    print("no answer after 5 model calls", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
