"""Real agent that behaves like goose: a CONCURRENT session-title side call.

At the start it fires a tool-less Chat Completions request with its own system prompt
("Write a short title for this session.") in a background thread, and at the same moment
starts its main tool loop (its own system prompt, tools offered). The loop does not wait for
the title; the title thread is joined only before exit. Prints the main reply on stdout (the
title goes to stderr).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from openai import OpenAI

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")
TITLE_MODEL = os.environ.get("AGENT_TITLE_MODEL", "gpt-4o-mini")
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
            "description": "The current UTC time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


def run_tool(name: str, arguments: str) -> str:
    args = json.loads(arguments or "{}")
    if name == "get_weather":
        return json.dumps({"city": args["city"], "forecast": "sunny"})
    if name == "get_time":
        return json.dumps({"utc": datetime.datetime.now(datetime.UTC).isoformat()})
    raise ValueError(f"unknown tool {name!r}")


def session_title(client: OpenAI, prompt: str, go: threading.Barrier) -> str:
    go.wait()
    response = client.chat.completions.create(
        model=TITLE_MODEL,
        messages=[
            {"role": "system", "content": "Write a short title for this session."},
            {"role": "user", "content": prompt},
        ],
    )
    return response.choices[0].message.content or ""


def main_loop(client: OpenAI, prompt: str, go: threading.Barrier) -> str:
    messages: list[dict] = [
        {"role": "system", "content": "You are a helpful weather agent. Use the tools."},
        {"role": "user", "content": prompt},
    ]
    go.wait()  # release the first task call together with the title call
    for _ in range(10):
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": run_tool(call.function.name, call.function.arguments),
                }
            )
    raise RuntimeError("no final answer after 10 model calls")


def main() -> int:
    client = OpenAI(max_retries=0)
    prompt = os.environ["FLOWPROOF_PROMPT"]
    go = threading.Barrier(2, timeout=30)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="title") as pool:
        title = pool.submit(session_title, client, prompt, go)  # not awaited by the loop
        reply = main_loop(client, prompt, go)
        print(reply)
        print(f"session title: {title.result(timeout=60)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
