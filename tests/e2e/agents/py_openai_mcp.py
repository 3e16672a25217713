"""Real agent: openai-python Chat Completions whose tools are an MCP server's tools.

The model decides (through OPENAI_BASE_URL, the model boundary); the tools run through an
`mcp` 2.x client session (the MCP boundary): the server's tools/list becomes the model's
tool declarations, and every tool call the model makes is a `tools/call` on the server.

Server: FLOWPROOF_MCP_SERVER_NOTES (a stdio command line) or FLOWPROOF_MCP_URL_NOTES, the
variables flowproof injects; MCP_MODE picks the client mode (auto by default).
NAME_PREFIX (a deliberate bug for the tests) is prepended to a `name` argument the model gave.
Faults (tests/e2e/test_mcp_faults.py): RETRY_TOOL_ERRORS=1 retries a tool call that failed
(an isError result or a JSON-RPC error) once, identically, before the model hears of it;
REPORT_TOOL_FAILURES=1 tells the model a call that raised (`tool failed: ...`) instead of
dying, and TOOL_TIMEOUT (seconds) bounds each call. RETRY_MUST_SUCCEED=1 lets a retry that
raises end the agent (its error uncaught), so a replay that refuses the retry is what fails.
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
ANSWERED: list[bool] = []  # the final answer is out (a dead server's session may still raise)


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


async def call_once(
    tools: Any, name: str, arguments: dict[str, Any], *, fatal: bool = False
) -> tuple[bool, str]:
    """(failed, text) of one tool call; with `fatal` an error that raises is not caught."""
    timeout = float(os.environ.get("TOOL_TIMEOUT", "0")) or None
    try:
        result = await asyncio.wait_for(tools.call_tool(name, arguments), timeout)
    except Exception as exc:
        caught = os.environ.get("REPORT_TOOL_FAILURES") or os.environ.get("RETRY_TOOL_ERRORS")
        if fatal or not caught:
            raise
        return True, f"tool failed: {type(exc).__name__}: {exc}"
    text = "".join(getattr(block, "text", "") for block in result.content)
    return bool(result.is_error), text


async def call_tool(tools: Any, name: str, arguments: dict[str, Any]) -> str:
    failed, text = await call_once(tools, name, arguments)
    if failed and os.environ.get("RETRY_TOOL_ERRORS"):
        print(f"retrying {name} after: {text}", file=sys.stderr)
        fatal = bool(os.environ.get("RETRY_MUST_SUCCEED"))
        failed, text = await call_once(tools, name, arguments, fatal=fatal)
    return text


async def main() -> int:
    model = OpenAI(max_retries=0)
    async with Client(server(), mode=os.environ.get("MCP_MODE", "auto")) as tools:
        offered = declarations(await tools.list_tools())
        messages: list[Any] = [
            {"role": "system", "content": "You keep notes. Use the tools."},
            {"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]},
        ]
        for _ in range(10):
            response = model.chat.completions.create(model=MODEL, messages=messages, tools=offered)
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                print(message.content, flush=True)
                ANSWERED.append(True)
                return 0
            for call in message.tool_calls:
                arguments = json.loads(call.function.arguments or "{}")
                if "name" in arguments:
                    arguments["name"] = os.environ.get("NAME_PREFIX", "") + arguments["name"]
                text = await call_tool(tools, call.function.name, arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as exc:
        if ANSWERED and os.environ.get("REPORT_TOOL_FAILURES"):
            sys.exit(0)  # the session of a server that died ends with an error: answered anyway
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
