"""Real agent whose model client reads neither OPENAI_BASE_URL nor any injected variable.

Its base URL comes from `--base URL` or else MY_LLM_BASE, as with agents configured by their
own settings: the spec maps `${flowproof.proxy_url}` into one of them. It also checks that
handles flowproof does not know yet are passed through untouched (they fill in later).
"""

from __future__ import annotations

import datetime
import json
import os
import sys

from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The current time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
PASSED_THROUGH = {
    "UNKNOWN_HANDLE": "${flowproof.no_such_handle}",
    "MCP_HANDLE": "${flowproof.mcp_url.notes}",
}


def run_tool(name: str, arguments: str) -> str:
    if name == "get_weather":
        return json.dumps({"city": json.loads(arguments)["city"], "forecast": "sunny"})
    return json.dumps({"now": datetime.datetime.now(datetime.UTC).isoformat()})


def main() -> int:
    for name, expected in PASSED_THROUGH.items():
        if name in os.environ and os.environ[name] != expected:
            print(f"agent: {name} is {os.environ[name]!r}, not {expected!r}", file=sys.stderr)
            return 4
    base = sys.argv[sys.argv.index("--base") + 1] if "--base" in sys.argv else None
    client = OpenAI(base_url=base or os.environ["MY_LLM_BASE"], api_key="own-key", max_retries=0)
    messages: list[dict] = [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]},
    ]
    for _ in range(8):
        response = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=TOOLS
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            print(message.content)
            return 0
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": run_tool(call.function.name, call.function.arguments),
                }
            )
    return 1


if __name__ == "__main__":
    sys.exit(main())
