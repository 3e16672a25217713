"""A real agent for the end-to-end tests: the `openai` SDK in a tool loop.

Its real get_time tool returns the CURRENT time (volatile on purpose). Knobs, all from the
environment, let one agent play every red path: AGENT_MODEL, AGENT_SYSTEM, AGENT_EXTRA_TOOL,
AGENT_CITY_TYPE (changes a schema), AGENT_STOP_AFTER (calls), AGENT_EXTRA_CALL,
AGENT_SWALLOW_ERRORS, AGENT_CRASH_FIRST (exit code), AGENT_HANG_AFTER (calls), AGENT_NO_MODEL,
AGENT_STREAM (same requests, streamed answers: stream is transport), AGENT_SDK_RETRIES
(the SDK's own retries of a failed call: 0 here, 2 by the SDK's default).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time

from openai import OpenAI

env = os.environ.get


def tools() -> list[dict]:
    declared = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": env("AGENT_CITY_TYPE", "string")}},
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
    if env("AGENT_EXTRA_TOOL"):
        declared.append(
            {
                "type": "function",
                "function": {
                    "name": env("AGENT_EXTRA_TOOL"),
                    "description": "An extra tool.",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        )
    return declared


def run_tool(name: str, arguments: str) -> str:
    if name == "get_weather":
        return json.dumps({"city": json.loads(arguments).get("city"), "forecast": "sunny"})
    if name == "get_time":
        return json.dumps({"now": datetime.datetime.now(datetime.UTC).isoformat()})
    return json.dumps({"ok": True})


def complete(client: OpenAI, messages: list[dict]) -> dict:
    """One model call; the assistant message as a history entry (same shape either way)."""
    model = env("AGENT_MODEL", "gpt-4o-mini")
    content: str | None = None
    calls: list[dict] = []
    if env("AGENT_STREAM"):
        stream = client.chat.completions.create(
            model=model,
            messages=messages,
            tools=tools(),
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    content = (content or "") + choice.delta.content
                for delta in choice.delta.tool_calls or []:
                    while len(calls) <= delta.index:
                        calls.append(
                            {
                                "id": "",
                                "type": "function",
                                "function": {"name": "", "arguments": ""},
                            }
                        )
                    call = calls[delta.index]
                    call["id"] = delta.id or call["id"]
                    if delta.function and delta.function.name:
                        call["function"]["name"] = delta.function.name
                    if delta.function and delta.function.arguments:
                        call["function"]["arguments"] += delta.function.arguments
    else:
        response = client.chat.completions.create(model=model, messages=messages, tools=tools())
        message = response.choices[0].message
        content = message.content
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in message.tool_calls or []
        ]
    entry: dict = {"role": "assistant", "content": content}
    if calls:
        entry["tool_calls"] = calls
    return entry


def main() -> int:
    if env("AGENT_CRASH_FIRST"):
        print("agent: cannot load my configuration", file=sys.stderr)
        return int(env("AGENT_CRASH_FIRST", "3"))
    if env("AGENT_NO_MODEL"):
        print("agent: nothing to do")
        return 0
    client = OpenAI(max_retries=int(env("AGENT_SDK_RETRIES", "0")))
    messages: list[dict] = [
        {"role": "system", "content": env("AGENT_SYSTEM", "You are a weather assistant.")},
        {"role": "user", "content": env("FLOWPROOF_PROMPT", "")},
    ]
    stop_after = int(env("AGENT_STOP_AFTER", "0"))
    hang_after = int(env("AGENT_HANG_AFTER", "-1"))
    for calls in range(8):
        if hang_after == calls:
            time.sleep(3600)
        try:
            message = complete(client, messages)
        except Exception as exc:
            if env("AGENT_SWALLOW_ERRORS"):
                print(f"agent: model error ignored: {exc}")
                return 0
            raise
        messages.append(message)
        if stop_after and calls + 1 >= stop_after:
            return 0
        if not message.get("tool_calls"):
            print(message["content"])
            break
        for call in message["tool_calls"]:
            function = call["function"]
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": run_tool(function["name"], function["arguments"]),
                }
            )
    if env("AGENT_EXTRA_CALL"):
        client.chat.completions.create(
            model=env("AGENT_MODEL", "gpt-4o-mini"), messages=[{"role": "user", "content": "bye"}]
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
