"""A scripted MCP client "agent" on the `mcp` 1.x SDK (`ClientSession`): handshake era only.

Usage (the 1.x SDK lives in .deps/mcp1, installed by scripts/bootstrap.sh):
    PYTHONPATH=.deps/mcp1 python py_client_v1.py [--transport stdio|http] [--name notes]
        [--server-cmd CMD | --url URL] [--steps write,read,slow,elicit,sample,roots,touch]

Same steps, canned answers, JSON summary and exit codes as py_client_v2.py (see there).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client_common as cc
import sdk_path

sdk_path.use_mcp1()  # before any `mcp` import

PROG = "py_client_v1"

try:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp import types as t
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
except ImportError as exc:
    cc.fail(PROG, f"needs the mcp 1.x SDK (PYTHONPATH=.deps/mcp1): {exc}", code=2)


async def run(args: argparse.Namespace, target: cc.Target) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "client": PROG,
        "sdk": f"mcp {_sdk_version()}",
        "mode": "legacy",
        "transport": target.transport,
        "server_source": target.source,
        "calls": [],
        "progress": [],
        "server_requests": [],
        "notifications": [],
        "log_messages": [],
    }

    async def on_sampling(ctx: Any, params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        prompt = cc.text_of([m.content for m in params.messages])
        summary["server_requests"].append({"method": "sampling/createMessage", "prompt": prompt})
        return t.CreateMessageResult(
            role="assistant",
            content=t.TextContent(type="text", text=cc.CANNED_SAMPLE),
            model=cc.CANNED_MODEL,
            stopReason="endTurn",
        )

    async def on_elicit(ctx: Any, params: Any) -> t.ElicitResult:
        summary["server_requests"].append(
            {"method": "elicitation/create", "message": params.message}
        )
        return t.ElicitResult(action="accept", content=cc.elicit_content())

    async def on_roots(ctx: Any) -> t.ListRootsResult:
        summary["server_requests"].append({"method": "roots/list"})
        return t.ListRootsResult(roots=[t.Root(uri=cc.root_uri(), name="notes")])

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        summary["log_messages"].append({"level": params.level, "data": params.data})

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            summary["notifications"].append({"error": cc.describe_error(message)})
            return
        inner = getattr(message, "root", message)
        method = getattr(inner, "method", None)
        if method is None:  # a server request: answered by the callbacks above
            return
        entry: dict[str, Any] = {"method": method}
        uri = getattr(getattr(inner, "params", None), "uri", None)
        if uri is not None:
            entry["uri"] = str(uri)
        summary["notifications"].append(entry)

    if target.transport == "stdio":
        # An explicit env: without it the SDK trims the spawned server's environment.
        params = StdioServerParameters(
            command=target.argv[0], args=target.argv[1:], env=dict(os.environ)
        )
        transport: Any = stdio_client(params)
    else:
        transport = streamable_http_client(target.url)

    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=timedelta(seconds=args.timeout),
            sampling_callback=on_sampling,
            elicitation_callback=on_elicit,
            list_roots_callback=on_roots,
            logging_callback=on_log,
            message_handler=on_message,
        ) as session:
            init = await session.initialize()
            summary["protocol_version"] = init.protocolVersion
            summary["server_name"] = init.serverInfo.name
            tools = await session.list_tools()
            summary["tools"] = sorted(tool.name for tool in tools.tools)
            for step in args.steps:
                tool, arguments = cc.step_call(step, args.slow_n)

                async def on_progress(
                    progress: float, total: float | None, message: str | None
                ) -> None:
                    summary["progress"].append(
                        {"progress": progress, "total": total, "message": message}
                    )
                    print(f"{PROG}: progress {progress}/{total} {message or ''}", file=sys.stderr)

                result = await session.call_tool(tool, arguments, progress_callback=on_progress)
                summary["calls"].append(
                    {
                        "tool": tool,
                        "arguments": arguments,
                        "is_error": bool(result.isError),
                        "text": cc.text_of(result.content),
                    }
                )
                if step == "touch":
                    await anyio.sleep(0.3)  # the notification may come on the GET stream
    return summary


def _sdk_version() -> str:
    from importlib.metadata import version

    return version("mcp")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    cc.add_target_args(parser)
    parser.add_argument(
        "--steps", default="write,read", help=f"comma list of {', '.join(cc.STEPS)}"
    )
    parser.add_argument("--slow-n", type=int, default=3, help="steps of slow_count")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    args = parser.parse_args()
    args.steps = cc.parse_steps(args.steps, PROG)
    target = cc.resolve_target(args, PROG)
    try:
        summary = anyio.run(run, args, target)
    except Exception as exc:
        cc.fail(
            PROG, f"session failed against {target.argv or target.url}: {cc.describe_error(exc)}", 2
        )
    return cc.emit(summary, PROG)


if __name__ == "__main__":
    raise SystemExit(main())
