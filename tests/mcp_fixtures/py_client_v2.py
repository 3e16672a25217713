"""A scripted MCP client "agent" on the `mcp` 2.x SDK (`mcp.Client`), no model involved.

Usage:
    python py_client_v2.py [--mode legacy|auto] [--transport stdio|http] [--name notes]
        [--server-cmd CMD | --url URL] [--steps write,read,slow,elicit,sample,roots,touch]

Finds its server like a flowproof-driven agent (see client_common.py), runs the steps against
the notes server (py_server_v2.py / py_server_v1.py), answers server-initiated requests with
canned values (sampling: CANNED_SAMPLE; elicitation: accept + env ELICIT_CONTENT, default
{"ok": true}; roots: env ROOT_URI) and prints a JSON summary. Exit 0 on success, 1 when a tool
call returned isError, 2 on a usage or connection error.
mode=legacy speaks the handshake era (initialize); mode=auto tries 2026-07-28 server/discover
first and falls back to initialize.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client_common as cc
import sdk_path

sdk_path.use_mcp2()  # before any `mcp` import

PROG = "py_client_v2"

try:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp import types as t
except ImportError as exc:  # pragma: no cover - a wrong environment
    cc.fail(PROG, f"needs the mcp 2.x SDK: {exc}", code=2)


async def run(args: argparse.Namespace, target: cc.Target) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "client": PROG,
        "sdk": f"mcp {_sdk_version()}",
        "mode": args.mode,
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
            stop_reason="endTurn",
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
        entry: dict[str, Any] = {"method": getattr(inner, "method", type(inner).__name__)}
        uri = getattr(getattr(inner, "params", None), "uri", None)
        if uri is not None:
            entry["uri"] = str(uri)
        summary["notifications"].append(entry)

    if target.transport == "stdio":
        # An explicit env: without it the SDK trims the spawned server's environment.
        server: Any = StdioServerParameters(
            command=target.argv[0], args=target.argv[1:], env=dict(os.environ)
        )
    else:
        server = target.url

    async with Client(
        server,
        mode=args.mode,
        sampling_callback=on_sampling,
        elicitation_callback=on_elicit,
        list_roots_callback=on_roots,
        logging_callback=on_log,
        message_handler=on_message,
        read_timeout_seconds=args.timeout,
        log_level=args.log_level,
    ) as client:
        summary["protocol_version"] = client.protocol_version
        info = client.server_info
        summary["server_name"] = info.name if info else None
        tools = await client.list_tools()
        summary["tools"] = sorted(tool.name for tool in tools.tools)
        for step in args.steps:
            tool, arguments = cc.step_call(step, args.slow_n)
            if step == "touch" and client.protocol_version >= "2026":
                # 2026-07-28 has no unsolicited notification: listen on subscriptions/listen.
                uri = f"note://{arguments['name']}"
                async with client.listen(resource_subscriptions=[uri]) as sub:
                    await _call(client, summary, tool, arguments)
                    with anyio.move_on_after(3):
                        async for event in sub:
                            summary["notifications"].append(
                                {
                                    "method": "subscriptions/listen",
                                    "uri": getattr(event, "uri", None),
                                }
                            )
                            break
                continue
            await _call(client, summary, tool, arguments)
            if step == "touch":
                await anyio.sleep(0.3)  # the notification may come on the GET stream: let it land
    return summary


async def _call(
    client: Client, summary: dict[str, Any], tool: str, arguments: dict[str, Any]
) -> None:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        summary["progress"].append({"progress": progress, "total": total, "message": message})
        print(f"{PROG}: progress {progress}/{total} {message or ''}", file=sys.stderr)

    result = await client.call_tool(tool, arguments, progress_callback=on_progress)
    summary["calls"].append(
        {
            "tool": tool,
            "arguments": arguments,
            "is_error": bool(result.is_error),
            "text": cc.text_of(result.content),
        }
    )


def _sdk_version() -> str:
    from importlib.metadata import version

    return version("mcp")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    cc.add_target_args(parser)
    parser.add_argument("--mode", choices=["legacy", "auto"], default="auto")
    parser.add_argument(
        "--steps", default="write,read", help=f"comma list of {', '.join(cc.STEPS)}"
    )
    parser.add_argument("--slow-n", type=int, default=3, help="steps of slow_count")
    parser.add_argument(
        "--log-level", default=None, help="2026-07-28: opt in to notifications/message at LEVEL"
    )
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
