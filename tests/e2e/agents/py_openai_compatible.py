"""Real agent: an OpenAI-compatible service through its own SDK, hand-written tool loop.

The first argument names the SDK, each pointed where its users point it:

* ``mistralai``: ``Mistral(server_url=MISTRAL_SERVER_URL)`` (the SDK has no base-URL
  variable; its requests go to ``<server>/v1/chat/completions``), key MISTRAL_API_KEY;
* ``groq``: ``Groq()`` reads GROQ_BASE_URL (requests go to
  ``<base>/openai/v1/chat/completions``, the path Azure's newer API shares) and GROQ_API_KEY;
* ``openrouter``: ``OpenAI(base_url=OPENROUTER_BASE_URL)``, OpenRouter's ``.../api/v1`` root;
* ``vllm``: ``OpenAI(base_url=VLLM_BASE_URL)``, a vLLM server's ``.../v1`` root, with the
  vLLM-only sampling fields it accepts in the body (``top_k``, ``repetition_penalty``).

With ``--stream`` each turn is streamed and rebuilt from its chunks.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any

MODEL = os.environ.get("AGENT_MODEL", "small-model")
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


def joined(chunks: Any) -> dict[str, Any]:
    """A streamed turn's chunks as one assistant message (the SDKs' chunk objects all have
    `choices[0].delta` with `content` and indexed `tool_calls` fragments)."""
    text, calls = "", {}
    for chunk in chunks:
        chunk = getattr(chunk, "data", chunk)  # mistralai wraps each chunk in an event
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for part in delta.tool_calls or []:
            call = calls.setdefault(part.index or 0, {"id": "", "name": "", "arguments": ""})
            call["id"] = part.id or call["id"]
            call["name"] += part.function.name or ""
            call["arguments"] += part.function.arguments or ""
    return message_of(text, [calls[i] for i in sorted(calls)])


def message_of(text: str | None, calls: list[dict[str, str]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or ""}
    if calls:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in calls
        ]
    return message


def plain(message: Any) -> dict[str, Any]:
    calls = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in message.tool_calls or []
    ]
    for call in calls:  # mistralai may hand arguments over parsed
        if not isinstance(call["arguments"], str):
            call["arguments"] = json.dumps(call["arguments"])
    return message_of(message.content, calls)


def turn_function(sdk: str, stream: bool) -> Any:
    """messages -> the assistant message, through the named SDK."""
    if sdk == "mistralai":
        try:
            from mistralai.client import Mistral  # 2.x and later
        except ImportError:
            from mistralai import Mistral  # type: ignore[attr-defined,no-redef]  # 1.x

        client = Mistral(
            api_key=os.environ["MISTRAL_API_KEY"], server_url=os.environ["MISTRAL_SERVER_URL"]
        )
        if stream:
            return lambda messages: joined(
                client.chat.stream(model=MODEL, messages=messages, tools=TOOLS)
            )
        return lambda messages: plain(
            client.chat.complete(model=MODEL, messages=messages, tools=TOOLS).choices[0].message
        )
    extra: dict[str, Any] = {}
    if sdk == "groq":
        from groq import Groq

        client = Groq()
    else:
        from openai import OpenAI

        variable = {"openrouter": "OPENROUTER_BASE_URL", "vllm": "VLLM_BASE_URL"}[sdk]
        client = OpenAI(base_url=os.environ[variable], api_key=os.environ["OPENAI_API_KEY"])
        if sdk == "vllm":
            extra = {"extra_body": {"top_k": 20, "repetition_penalty": 1.05}}
    create = client.chat.completions.create
    if stream:
        return lambda messages: joined(
            create(model=MODEL, messages=messages, tools=TOOLS, stream=True, **extra)
        )
    return lambda messages: plain(
        create(model=MODEL, messages=messages, tools=TOOLS, **extra).choices[0].message
    )


def main() -> int:
    sdk = sys.argv[1]
    turn = turn_function(sdk, "--stream" in sys.argv)
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]},
    ]
    for _ in range(10):
        message = turn(messages)
        messages.append(message)
        if not message.get("tool_calls"):
            print(message["content"])
            return 0
        for call in message["tool_calls"]:
            function = call["function"]
            result = run_tool(function["name"], json.loads(function["arguments"] or "{}"))
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "name": function["name"],
                    "content": json.dumps(result),
                }
            )
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
