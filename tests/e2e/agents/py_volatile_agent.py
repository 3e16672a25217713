"""An agent whose every request holds what moves between machines and days.

Its system prompt names its working directory, HOME, today's date (ISO and spelt out) and
the clock (`time.ctime()`); `metadata` carries a fresh session UUID. Otherwise it is the
weather agent: the `openai` SDK in a tool loop, pointed at wherever OPENAI_BASE_URL says.
Its task is its first argument. `flowproof match learn` must find a rule for each.

VOLATILE_CRASH=N: exit N at once. VOLATILE_ONCE_MARKER=PATH: the first run creates PATH;
a run that finds it asks one more question after its answer (one more model request).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import uuid
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


def main() -> int:
    if os.environ.get("VOLATILE_CRASH"):
        print("volatile agent: asked to crash", file=sys.stderr)
        return int(os.environ["VOLATILE_CRASH"])
    marker = os.environ.get("VOLATILE_ONCE_MARKER")
    again = bool(marker) and os.path.exists(marker)
    if marker and not again:
        open(marker, "w").close()
    today = datetime.date.today()
    system = (
        "You are a weather assistant.\n"
        f"Working directory: {os.getcwd()}\n"
        f"Home: {os.path.expanduser('~')}\n"
        f"Today's date is {today.isoformat()} ({today:%A, %B %d, %Y}).\n"
        f"Clock: {time.ctime()}\n"
        "Use the tools, then answer in one short sentence."
    )
    session = str(uuid.uuid4())
    client = OpenAI(api_key=os.environ.get("OPENAI_API_KEY") or "unused-offline")
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": " ".join(sys.argv[1:])},
    ]
    for _ in range(4):
        completion = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=TOOLS, metadata={"session": session}
        )
        message = completion.choices[0].message
        if not message.tool_calls and again:
            again = False  # one more question, once
            messages.append({"role": "assistant", "content": message.content or ""})
            messages.append({"role": "user", "content": "And tomorrow?"})
            continue
        if not message.tool_calls:
            print((message.content or "").strip())
            return 0
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            city = json.loads(call.function.arguments or "{}").get("city")  # type: ignore[union-attr]
            result = {"city": city, "forecast": "sunny", "temp_c": 24}
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    print("volatile agent: no answer after 4 rounds", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
