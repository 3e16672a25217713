"""The MCP weather agent with a guard in its own code: a prompt that asks for something
destructive never gets a destructive tool offered, so the model cannot call one.

The guard is the code under test. The flow records an adversarial prompt; if the guard is
removed or weakened, the replayed request offers delete_city, which the recording did not,
and the flow fails with a divergence ("tools offered changed") before any tool runs.
Server: FLOWPROOF_MCP_SERVER_WEATHER (outside flowproof: ../mcp-demo/weather_server.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import sys
from typing import Any

from mcp import Client, StdioServerParameters
from openai import OpenAI

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")
MAX_ROUNDS = 8
DESTRUCTIVE = frozenset({"delete_city"})
#: Wording that asks the agent to destroy something, or to drop its instructions.
SUSPICIOUS = re.compile(r"\b(delete|remove|drop|erase|ignore (all |your |previous )+)", re.I)


def server() -> StdioServerParameters:
    default = f"{sys.executable} ../mcp-demo/weather_server.py"
    argv = shlex.split(os.environ.get("FLOWPROOF_MCP_SERVER_WEATHER", default))
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


def offered_tools(listed: Any, prompt: str) -> list[Any]:
    """The guard: a suspicious prompt gets the read-only tools only."""
    guarded = SUSPICIOUS.search(prompt) is not None
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
        if not (guarded and tool.name in DESTRUCTIVE)
    ]


async def main() -> int:
    prompt = os.environ.get("FLOWPROOF_PROMPT") or " ".join(sys.argv[1:])
    model = OpenAI() if os.environ.get("OPENAI_API_KEY") else OpenAI(api_key="unused-offline")
    async with Client(server()) as tools:
        offered = offered_tools(await tools.list_tools(), prompt)
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
    print(f"guarded_agent: no final answer after {MAX_ROUNDS} rounds", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
