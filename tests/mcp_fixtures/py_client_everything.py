"""A scripted client for npm `@modelcontextprotocol/server-everything` on the `mcp` 2.x SDK.

Usage:
    python py_client_everything.py [--mode legacy|auto] [--transport stdio|http]
        [--name everything] [--server-cmd CMD | --url URL] [--steps ...]

Server: env FLOWPROOF_MCP_SERVER_EVERYTHING / FLOWPROOF_MCP_URL_EVERYTHING (see
client_common.py), e.g. `tests/mcp_fixtures/run_everything.sh stdio`. The server speaks the
handshake era only (mode=auto falls back to initialize). Steps (default: all, in this order):
  roots     wait for the roots/list the server sends by itself ~350 ms after initialized
  echo      tools/call echo
  progress  trigger-long-running-operation (3 steps over 0.6 s: notifications/progress)
  sampling  trigger-sampling-request (server asks sampling/createMessage; canned answer)
  elicit    trigger-elicitation-request (server asks elicitation/create; accept, canned content)
  getroots  get-roots-list (answers from the roots it fetched)
  subscribe resources/subscribe + toggle-subscriber-updates: one notifications/resources/updated
            at once (then every 5 s until toggled off again), then unsubscribe
Prints a JSON summary; exit 0 on success, 1 when a tool call returned isError, 2 on errors.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client_common as cc
import sdk_path

sdk_path.use_mcp2()  # before any `mcp` import

PROG = "py_client_everything"
STEPS = ("roots", "echo", "progress", "sampling", "elicit", "getroots", "subscribe")
ELICIT_ANSWER = {"name": "Ada Lovelace", "check": True, "email": "ada@example.com", "integer": 42}

try:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp import types as t
except ImportError as exc:  # pragma: no cover - a wrong environment
    cc.fail(PROG, f"needs the mcp 2.x SDK: {exc}", code=2)


class Session:
    def __init__(self, args: argparse.Namespace, target: cc.Target) -> None:
        self.args = args
        self.started = time.monotonic()
        self.current: str | None = None  # the tool call in flight, if any
        self.roots_seen = anyio.Event()
        self.updated_seen = anyio.Event()
        self.summary: dict[str, Any] = {
            "client": PROG,
            "mode": args.mode,
            "transport": target.transport,
            "server_source": target.source,
            "calls": [],
            "progress": [],
            "server_requests": [],
            "notifications": [],
            "log_messages": [],
        }

    def _request(self, method: str, **extra: Any) -> None:
        entry = {"method": method, "during": self.current or "no call (unsolicited)", **extra}
        entry["at_s"] = round(time.monotonic() - self.started, 2)
        self.summary["server_requests"].append(entry)

    async def on_sampling(
        self, ctx: Any, params: t.CreateMessageRequestParams
    ) -> t.CreateMessageResult:
        self._request(
            "sampling/createMessage", prompt=cc.text_of([m.content for m in params.messages])
        )
        return t.CreateMessageResult(
            role="assistant",
            content=t.TextContent(type="text", text=cc.CANNED_SAMPLE),
            model=cc.CANNED_MODEL,
            stop_reason="endTurn",
        )

    async def on_elicit(self, ctx: Any, params: Any) -> t.ElicitResult:
        self._request("elicitation/create", message=params.message)
        return t.ElicitResult(action="accept", content=ELICIT_ANSWER)

    async def on_roots(self, ctx: Any) -> t.ListRootsResult:
        self._request("roots/list")
        self.roots_seen.set()
        return t.ListRootsResult(roots=[t.Root(uri=cc.root_uri(), name="workspace")])

    async def on_log(self, params: t.LoggingMessageNotificationParams) -> None:
        self.summary["log_messages"].append({"level": params.level, "data": params.data})

    async def on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.summary["notifications"].append({"error": cc.describe_error(message)})
            return
        inner = getattr(message, "root", message)
        entry: dict[str, Any] = {"method": getattr(inner, "method", type(inner).__name__)}
        uri = getattr(getattr(inner, "params", None), "uri", None)
        if uri is not None:
            entry["uri"] = str(uri)
            self.updated_seen.set()
        self.summary["notifications"].append(entry)

    async def call(self, client: Client, tool: str, arguments: dict[str, Any]) -> None:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.summary["progress"].append(
                {"progress": progress, "total": total, "message": message}
            )
            print(f"{PROG}: progress {progress}/{total}", file=sys.stderr)

        self.current = tool
        try:
            result = await client.call_tool(tool, arguments, progress_callback=on_progress)
        finally:
            self.current = None
        self.summary["calls"].append(
            {
                "tool": tool,
                "arguments": arguments,
                "is_error": bool(result.is_error),
                "text": cc.text_of(result.content)[:400],
            }
        )

    async def run(self, server: Any) -> dict[str, Any]:
        async with Client(
            server,
            mode=self.args.mode,
            sampling_callback=self.on_sampling,
            elicitation_callback=self.on_elicit,
            list_roots_callback=self.on_roots,
            logging_callback=self.on_log,
            message_handler=self.on_message,
            read_timeout_seconds=self.args.timeout,
        ) as client:
            self.summary["protocol_version"] = client.protocol_version
            info = client.server_info
            self.summary["server_name"] = info.name if info else None
            tools = await client.list_tools()
            self.summary["tools"] = sorted(tool.name for tool in tools.tools)
            for step in self.args.steps:
                await self.step(client, step)
        return self.summary

    async def step(self, client: Client, step: str) -> None:
        if step == "roots":
            with anyio.move_on_after(3):
                await self.roots_seen.wait()
            if not self.roots_seen.is_set():
                self.summary["notifications"].append({"error": "no roots/list within 3 s"})
        elif step == "echo":
            await self.call(client, "echo", {"message": "hello"})
        elif step == "progress":
            await self.call(client, "trigger-long-running-operation", {"duration": 0.6, "steps": 3})
        elif step == "sampling":
            await self.call(
                client, "trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 16}
            )
        elif step == "elicit":
            await self.call(client, "trigger-elicitation-request", {})
        elif step == "getroots":
            await self.call(client, "get-roots-list", {})
        elif step == "subscribe":
            resources = await client.list_resources()
            if not resources.resources:
                self.summary["notifications"].append({"error": "server lists no resources"})
                return
            uri = str(resources.resources[0].uri)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # resources/subscribe is deprecated in 2026-07-28
                await client.subscribe_resource(uri)
                await self.call(client, "toggle-subscriber-updates", {})
                with anyio.move_on_after(3):
                    await self.updated_seen.wait()
                if not self.updated_seen.is_set():
                    self.summary["notifications"].append(
                        {"error": f"no resources/updated for {uri}"}
                    )
                await self.call(client, "toggle-subscriber-updates", {})
                await client.unsubscribe_resource(uri)
            self.summary["subscribed"] = uri


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    cc.add_target_args(parser)
    parser.set_defaults(name="everything")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="auto")
    parser.add_argument(
        "--steps", default=",".join(STEPS), help=f"comma list of {', '.join(STEPS)}"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    args = parser.parse_args()
    args.steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    if unknown := [s for s in args.steps if s not in STEPS]:
        cc.fail(PROG, f"unknown step(s) {unknown}; known: {', '.join(STEPS)}", code=2)
    target = cc.resolve_target(args, PROG)
    if target.transport == "stdio":
        server: Any = StdioServerParameters(
            command=target.argv[0], args=target.argv[1:], env=dict(os.environ)
        )
    else:
        server = target.url
    session = Session(args, target)
    try:
        summary = anyio.run(session.run, server)
    except Exception as exc:
        cc.fail(
            PROG, f"session failed against {target.argv or target.url}: {cc.describe_error(exc)}", 2
        )
    return cc.emit(summary, PROG)


if __name__ == "__main__":
    raise SystemExit(main())
