"""A support bot whose tools are an MCP server's, across a whole conversation: one `mcp` 2.x
client session stays open from the first message to the last, the server's tools/list
becomes the model's declarations, and each tool call the model makes is a tools/call.

Server: FLOWPROOF_MCP_SERVER_ORDERS (a stdio command line flowproof injects).
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
from orders import SYSTEM, chat_turn, main_guarded


def server() -> Any:
    command = os.environ.get("FLOWPROOF_MCP_SERVER_ORDERS")
    if not command:
        raise RuntimeError("set FLOWPROOF_MCP_SERVER_ORDERS")
    argv = shlex.split(command)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


async def converse_async() -> int:
    model = OpenAI(max_retries=0)
    loop = asyncio.get_running_loop()
    async with Client(server(), mode=os.environ.get("MCP_MODE", "auto")) as tools:
        offered = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": tool.input_schema,
                },
            }
            for tool in (await tools.list_tools()).tools
        ]
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]

        def call(name: str, arguments: str) -> str:
            future = asyncio.run_coroutine_threadsafe(
                tools.call_tool(name, json.loads(arguments or "{}")), loop
            )
            result = future.result()
            return "".join(getattr(block, "text", "") for block in result.content)

        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line:
                return 0
            messages.append({"role": "user", "content": line.rstrip("\n")})
            reply = await asyncio.to_thread(chat_turn, model, messages, offered, call)
            print(reply, flush=True)
            print("> ", flush=True)


def main() -> int:
    return asyncio.run(converse_async())


if __name__ == "__main__":
    main_guarded(main)
