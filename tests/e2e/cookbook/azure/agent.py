"""Azure OpenAI through LiteLLM: `litellm.completion` on a deployment, one function tool.

The `azure/<deployment>` provider reads AZURE_API_BASE (the Azure OpenAI resource),
AZURE_API_KEY and AZURE_API_VERSION (LiteLLM's default when unset), and calls the
deployment's Chat Completions route with the key in `api-key`.
"""

from __future__ import annotations

import json
import os
import sys

import litellm

MODEL = "azure/weather-gpt"  # the deployment
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
    return json.dumps({"city": city, "forecast": "sunny", "celsius": 24})


def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    messages: list = [
        {"role": "system", "content": "You are a weather assistant. Use the tools."},
        {"role": "user", "content": task},
    ]
    for _ in range(5):
        message = litellm.completion(model=MODEL, messages=messages, tools=TOOLS).choices[0].message
        messages.append(message)  # LiteLLM takes its own Message objects back
        if not message.tool_calls:
            print(message.content)
            return 0
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": get_weather(**arguments)}
            )
    print("no answer after 5 model calls", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
