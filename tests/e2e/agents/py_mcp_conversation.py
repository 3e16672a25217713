"""Real agent: an openai-python chat loop whose tools are an MCP server's, across turns.

One `mcp` 2.x client session stays open from the first message to the last. Each line on
stdin is a user turn: the model decides (through OPENAI_BASE_URL), each tool call it makes
is a `tools/call` on the server, the reply is printed, and then, before the `> ` line that
ends the turn, the agent writes an audit note of the turn itself (`write_note` of
`turn-<k>.log`: a call of the agent's own, not the model's).

Server: FLOWPROOF_MCP_SERVER_NOTES (a stdio command line) or FLOWPROOF_MCP_URL_NOTES.
DEFER_TURN_LOG=1 (a deliberate bug for the tests) writes each turn's audit note only when
the next message arrives: the same calls in the same order, one of them in another turn.
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
SYSTEM = "You keep notes. Use the tools."


def server() -> Any:
    command = os.environ.get("FLOWPROOF_MCP_SERVER_NOTES")
    if command:
        argv = shlex.split(command)
        return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    url = os.environ.get("FLOWPROOF_MCP_URL_NOTES")
    if not url:
        raise RuntimeError("set FLOWPROOF_MCP_SERVER_NOTES or FLOWPROOF_MCP_URL_NOTES")
    return url


def declarations(tools: Any) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.input_schema,
            },
        }
        for tool in tools.tools
        if tool.name in ("write_note", "read_note")
    ]


async def answer(model: OpenAI, tools: Any, messages: list[Any], offered: list[Any]) -> str:
    """One turn: model calls and the tool calls they ask for, until a text answer."""
    for _ in range(10):
        response = model.chat.completions.create(model=MODEL, messages=messages, tools=offered)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments or "{}")
            result = await tools.call_tool(call.function.name, arguments)
            text = "".join(getattr(block, "text", "") for block in result.content)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    raise RuntimeError("no final answer after 10 model calls")


async def audit(tools: Any, turn: int) -> None:
    await tools.call_tool("write_note", {"name": f"turn-{turn}.log", "text": "answered"})


async def main() -> int:
    model = OpenAI(max_retries=0)
    deferred = os.environ.get("DEFER_TURN_LOG") == "1"
    async with Client(server(), mode=os.environ.get("MCP_MODE", "auto")) as tools:
        offered = declarations(await tools.list_tools())
        messages: list[Any] = [{"role": "system", "content": SYSTEM}]
        pending: list[int] = []
        turn = 0
        while line := await asyncio.to_thread(sys.stdin.readline):
            turn += 1
            for earlier in pending:  # the bug: the last turn's note, written in this one
                await audit(tools, earlier)
            pending.clear()
            messages.append({"role": "user", "content": line.rstrip("\n")})
            print(await answer(model, tools, messages, offered), flush=True)
            if deferred:
                pending.append(turn)
            else:
                await audit(tools, turn)
            print("> ", flush=True)
        for earlier in pending:
            await audit(tools, earlier)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
