"""Real agent: openai-python Responses API, streamed with ``client.responses.stream(...)``.

Chains turns with ``previous_response_id``: each follow-up sends only the new
function_call_output items (the server keeps the history).
"""

from __future__ import annotations

import datetime
import json
import os
import sys

from openai import OpenAI

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    },
    {
        "type": "function",
        "name": "get_time",
        "description": "The current UTC time.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        "strict": True,
    },
]


def run_tool(name: str, arguments: str) -> str:
    args = json.loads(arguments or "{}")
    if name == "get_weather":
        return json.dumps({"city": args["city"], "forecast": "sunny"})
    if name == "get_time":
        return json.dumps({"utc": datetime.datetime.now(datetime.UTC).isoformat()})
    raise ValueError(f"unknown tool {name!r}")


def main() -> int:
    client = OpenAI(max_retries=0)
    new_items: list = [{"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]}]
    previous_id: str | None = None
    for _ in range(10):
        extra = {"previous_response_id": previous_id} if previous_id else {}
        streamed_text: list[str] = []
        with client.responses.stream(
            model=MODEL,
            instructions="You are a weather assistant. Use the tools.",
            input=new_items,
            tools=TOOLS,
            **extra,
        ) as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    streamed_text.append(event.delta)
            response = stream.get_final_response()
        previous_id = response.id
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            text = "".join(streamed_text)
            if text != response.output_text:
                raise RuntimeError("streamed deltas disagree with the completed response")
            print(text)
            return 0
        new_items = [
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": run_tool(call.name, call.arguments),
            }
            for call in calls
        ]
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
