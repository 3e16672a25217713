"""Real agent: the `ollama` Python client's native `/api/chat`, hand-written tool loop.

``ollama.Client()`` reads OLLAMA_HOST (the server, without `/api`). With ``--stream`` each
turn is streamed (NDJSON) and rebuilt from its chunks; otherwise ``stream=False``. With
``--embed`` the agent first embeds the question (`/api/embed`), as a retrieval agent does;
with ``--list`` it first lists the models (`GET /api/tags`) and goes on if that is refused;
with ``--generate`` it first drafts notes on the question with the module-level
``ollama.generate`` (`/api/generate`, streamed with ``--stream``) and puts the draft in the
system prompt, so a chat that replays proves the draft was served from the trace.
Tool results go back as `tool` messages named by `tool_name`.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any

import ollama

MODEL = os.environ.get("AGENT_MODEL", "llama3.2")
SYSTEM = "You are a weather assistant. Use the tools."
TOOLS: list[dict[str, Any]] = [
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


def run_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "get_weather":
        return {"city": args["city"], "forecast": "sunny"}
    if name == "get_time":
        return {"utc": datetime.datetime.now(datetime.UTC).isoformat()}
    raise ValueError(f"unknown tool {name!r}")


def turn(client: ollama.Client, messages: list[Any], stream: bool) -> dict[str, Any]:
    """One model turn as an assistant message (a stream's chunks joined)."""
    if not stream:
        message = client.chat(model=MODEL, messages=messages, tools=TOOLS, stream=False).message
        return {
            "role": "assistant",
            "content": message.content or "",
            "tool_calls": [call.model_dump() for call in message.tool_calls or []],
        }
    content, calls = "", []
    for chunk in client.chat(model=MODEL, messages=messages, tools=TOOLS, stream=True):
        content += chunk.message.content or ""
        calls += [call.model_dump() for call in chunk.message.tool_calls or []]
    return {"role": "assistant", "content": content, "tool_calls": calls}


def draft(prompt: str, stream: bool) -> str:
    """Notes on the question from `/api/generate` (the module's client reads OLLAMA_HOST)."""
    asked = f"Notes on: {prompt}"
    if not stream:
        return ollama.generate(model=MODEL, prompt=asked, stream=False).response
    return "".join(chunk.response for chunk in ollama.generate(MODEL, asked, stream=True))


def main() -> int:
    stream = "--stream" in sys.argv
    client = ollama.Client()
    prompt = os.environ["FLOWPROOF_PROMPT"]
    if "--list" in sys.argv:  # a client that lists the models first, and goes on without
        try:
            client.list()
        except ollama.ResponseError as exc:
            print(f"listing refused ({exc.status_code}); going on", file=sys.stderr)
    if "--embed" in sys.argv:
        vectors = client.embed(model="nomic-embed-text", input=[prompt]).embeddings
        assert len(vectors) == 1 and vectors[0], "no embedding"
    system = f"{SYSTEM} Notes: {draft(prompt, stream)}" if "--generate" in sys.argv else SYSTEM
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": prompt},
    ]
    for _ in range(10):
        message = turn(client, messages, stream)
        messages.append(message)
        if not message["tool_calls"]:
            print(message["content"])
            return 0
        for call in message["tool_calls"]:
            function = call["function"]
            result = run_tool(function["name"], dict(function["arguments"] or {}))
            messages.append(
                {"role": "tool", "content": json.dumps(result), "tool_name": function["name"]}
            )
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
