"""The weather tool loop over the Responses API's WebSocket transport through the openai
SDK's own client (`client.responses.connect()`), where py_responses_websocket.py speaks the
frames itself: the SDK's handling of a closed socket is what a fault there meets.

One connection; each model call is one `response.create` continuing the previous response
(`previous_response_id`, only the new items, `store: false`). The SDK reconnects only when
given `on_reconnecting`; WS_RECONNECT=1 passes one (it keeps the defaults). It prints the
final reply, or `agent error: TYPE: MESSAGE` and exits 1 on an exception.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from openai import OpenAI

MODEL = os.environ.get("WS_MODEL", "gpt-4o-mini")
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "type": "function",
        "name": "get_time",
        "description": "The current time.",
        "parameters": {"type": "object", "properties": {}},
    },
]


def tool(name: str, arguments: str) -> str:
    if name == "get_weather":
        return json.dumps({"city": json.loads(arguments).get("city"), "forecast": "sunny"})
    return json.dumps({"now": "2026-01-01T09:00:00Z"})


def reconnecting(event: Any) -> None:
    print(f"reconnecting: {event}", file=sys.stderr, flush=True)


def main() -> int:
    prompt = os.environ.get("FLOWPROOF_PROMPT") or (sys.argv[1] if len(sys.argv) > 1 else "")
    options: dict[str, Any] = {}
    if os.environ.get("WS_RECONNECT"):
        options["on_reconnecting"] = reconnecting
    items: list[Any] = [{"role": "user", "content": prompt}]
    previous: str | None = None
    with OpenAI().responses.connect(**options) as connection:
        for _ in range(8):
            connection.response.create(
                model=MODEL,
                tools=TOOLS,
                store=False,
                input=items,
                previous_response_id=previous,
            )
            response: Any = None
            for event in connection:
                if event.type == "error":
                    raise RuntimeError(f"error event: {event}")
                if event.type == "response.completed":
                    response = event.response
                    break
            if response is None:
                raise RuntimeError("the connection ended without response.completed")
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                print(response.output_text)
                return 0
            items = [
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": tool(call.name, call.arguments),
                }
                for call in calls
            ]
            previous = response.id
    print("error: too many model calls")
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
