"""A tool-calling agent whose tools live on an MCP server: openai (Chat Completions) + mcp.

The model decides through OPENAI_BASE_URL (the model boundary); every tool call it makes is a
`tools/call` on the MCP server (the tool boundary). The server is the command line in
FLOWPROOF_MCP_SERVER_WEATHER, the variable flowproof injects for the spec's `weather` server
(outside flowproof: `python weather_server.py`). The task is FLOWPROOF_PROMPT.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from typing import Any

from mcp import Client, StdioServerParameters
from openai import OpenAI

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")
MAX_ROUNDS = 8


def server() -> StdioServerParameters:
    command = os.environ.get("FLOWPROOF_MCP_SERVER_WEATHER", f"{sys.executable} weather_server.py")
    argv = shlex.split(command)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


def declarations(listed: Any) -> list[Any]:
    """The server's tools, offered to the model as functions."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.input_schema,
            },
        }
        for tool in listed.tools
    ]


async def main() -> int:
    prompt = os.environ.get("FLOWPROOF_PROMPT") or " ".join(sys.argv[1:])
    model = OpenAI() if os.environ.get("OPENAI_API_KEY") else OpenAI(api_key="unused-offline")
    async with Client(server()) as tools:
        offered = declarations(await tools.list_tools())
        messages: list[Any] = [
            {"role": "system", "content": "You are a weather assistant. Use the tools."},
            {"role": "user", "content": prompt},
        ]
        for _ in range(MAX_ROUNDS):
            response = model.chat.completions.create(model=MODEL, messages=messages, tools=offered)
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                print((message.content or "").strip())
                return 0
            for call in message.tool_calls:
                result = await tools.call_tool(
                    call.function.name, json.loads(call.function.arguments or "{}")
                )
                text = "".join(getattr(block, "text", "") for block in result.content)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    print(f"weather_agent: no final answer after {MAX_ROUNDS} rounds", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
