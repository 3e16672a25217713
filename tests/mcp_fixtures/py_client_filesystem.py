"""A scripted client for npm `@modelcontextprotocol/server-filesystem` (stdio) on the `mcp` 2.x SDK.

Usage:
    python py_client_filesystem.py [--mode legacy|auto] [--name files] [--server-cmd CMD]
        [--steps list,write,read] [--roots DIR]

Server: env FLOWPROOF_MCP_SERVER_FILES (name "files"), else --server-cmd, e.g.
    node tests/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js /some/dir
Steps: list = list_allowed_directories; write = write_file <dir>/$NOTE_NAME with $NOTE_TEXT
(default a.txt / hello: a REAL file); read = read_text_file of it. <dir> is env FS_DIR, else
the first allowed directory the server lists. --roots DIR advertises the roots capability:
the server then sends roots/list right after initialized (unsolicited) and REPLACES its
allowed directories with DIR. Handshake era only (mode=auto falls back to initialize).
Prints a JSON summary; exit 0 on success, 1 when a tool call returned isError, 2 on errors.
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

PROG = "py_client_filesystem"
STEPS = ("list", "write", "read")

try:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp import types as t
except ImportError as exc:  # pragma: no cover - a wrong environment
    cc.fail(PROG, f"needs the mcp 2.x SDK: {exc}", code=2)


async def run(args: argparse.Namespace, target: cc.Target) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "client": PROG,
        "mode": args.mode,
        "transport": "stdio",
        "server_source": target.source,
        "calls": [],
        "server_requests": [],
        "notifications": [],
    }
    roots_seen = anyio.Event()

    async def on_roots(ctx: Any) -> t.ListRootsResult:
        summary["server_requests"].append({"method": "roots/list"})
        roots_seen.set()
        return t.ListRootsResult(
            roots=[t.Root(uri=Path(args.roots).resolve().as_uri(), name="files")]
        )

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            summary["notifications"].append({"error": cc.describe_error(message)})
            return
        inner = getattr(message, "root", message)
        summary["notifications"].append({"method": getattr(inner, "method", type(inner).__name__)})

    server = StdioServerParameters(
        command=target.argv[0], args=target.argv[1:], env=dict(os.environ)
    )
    async with Client(
        server,
        mode=args.mode,
        list_roots_callback=on_roots if args.roots else None,
        message_handler=on_message,
        read_timeout_seconds=args.timeout,
    ) as client:
        summary["protocol_version"] = client.protocol_version
        info = client.server_info
        summary["server_name"] = info.name if info else None
        if args.roots:
            with anyio.move_on_after(3):
                await roots_seen.wait()
            await anyio.sleep(0.2)  # the server applies the roots after answering
        tools = await client.list_tools()
        summary["tools"] = sorted(tool.name for tool in tools.tools)
        directory = os.environ.get("FS_DIR")
        for step in args.steps:
            if step == "list" or directory is None:
                text = await _call(client, summary, "list_allowed_directories", {})
                lines = [line for line in text.splitlines()[1:] if line.strip()]
                directory = directory or (lines[0] if lines else None)
                if step == "list":
                    summary["allowed_directories"] = lines
                    continue
            if directory is None:
                cc.fail(PROG, "the server lists no allowed directory and FS_DIR is unset", 2)
            path = str(Path(directory) / cc.note_name())
            if step == "write":
                await _call(
                    client, summary, "write_file", {"path": path, "content": cc.note_text()}
                )
            elif step == "read":
                await _call(client, summary, "read_text_file", {"path": path})
    return summary


async def _call(
    client: Client, summary: dict[str, Any], tool: str, arguments: dict[str, Any]
) -> str:
    result = await client.call_tool(tool, arguments)
    text = cc.text_of(result.content)
    summary["calls"].append(
        {"tool": tool, "arguments": arguments, "is_error": bool(result.is_error), "text": text}
    )
    return text


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    cc.add_target_args(parser)
    parser.set_defaults(name="files")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="auto")
    parser.add_argument(
        "--steps", default="list,write,read", help=f"comma list of {', '.join(STEPS)}"
    )
    parser.add_argument("--roots", help="advertise roots and answer roots/list with this directory")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    args = parser.parse_args()
    if args.transport != "stdio":
        cc.fail(PROG, "server-filesystem speaks stdio only", code=2)
    args.steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    if unknown := [s for s in args.steps if s not in STEPS]:
        cc.fail(PROG, f"unknown step(s) {unknown}; known: {', '.join(STEPS)}", code=2)
    target = cc.resolve_target(args, PROG)
    try:
        summary = anyio.run(run, args, target)
    except Exception as exc:
        cc.fail(PROG, f"session failed against {target.argv}: {cc.describe_error(exc)}", 2)
    return cc.emit(summary, PROG)


if __name__ == "__main__":
    raise SystemExit(main())
