"""The notes MCP server of `py_server_v2.py`, on the `mcp` 1.x SDK (`FastMCP`): handshake era only.

Usage (the 1.x SDK lives in .deps/mcp1, installed by scripts/bootstrap.sh):
    PYTHONPATH=.deps/mcp1 NOTES_DIR=/tmp/notes python py_server_v1.py
        [--transport stdio|http] [--port N] [--json-response] [--stateless]

Same tools and server.log lines as py_server_v2.py. Server-initiated traffic: elicitation and
sampling are server-to-client requests tied to the tool call (on HTTP: inside that POST's SSE
answer); roots/list is sent unrelated to any request (on HTTP: on the GET stream);
resources/updated is an unrelated notification (on HTTP: on the GET stream).
HTTP binds 127.0.0.1 only, path /mcp.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import notes_store
import sdk_path

sdk_path.use_mcp1()  # before any `mcp` import

try:
    import anyio
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.server.fastmcp.exceptions import ToolError
    from mcp.types import SamplingMessage, TextContent
    from pydantic import BaseModel, Field
except ImportError as exc:
    sys.exit(f"py_server_v1: needs the mcp 1.x SDK (PYTHONPATH=.deps/mcp1): {exc}")

server = FastMCP("notes", instructions="A notes server for flowproof's MCP tests.")


def _guard(fn, *args):
    try:
        return fn(*args)
    except ValueError as exc:
        raise ToolError(str(exc)) from exc


@server.tool()
def read_note(name: str) -> str:
    """Read the note called `name`."""
    notes_store.log_call("read_note", {"name": name})
    return _guard(notes_store.read_note, name)


@server.tool()
def write_note(name: str, text: str) -> str:
    """Write `text` to the note called `name` (a real file in NOTES_DIR)."""
    notes_store.log_call("write_note", {"name": name, "text": text})
    return _guard(notes_store.write_note, name, text)


@server.tool()
async def slow_count(n: int, ctx: Context, delay: float = 0.1) -> str:
    """Count to `n`, one progress notification (and one log message) per step."""
    notes_store.log_call("slow_count", {"delay": delay, "n": n})
    for i in range(1, n + 1):
        await anyio.sleep(delay)
        await ctx.report_progress(i, n, f"step {i}/{n}")
    await ctx.info(f"counted to {n}")
    return f"counted to {n}"


class Confirm(BaseModel):
    ok: bool = Field(description="Write the note?")


@server.tool()
async def confirm_write(name: str, text: str, ctx: Context) -> str:
    """Ask the user (elicitation) before writing the note."""
    answer = await ctx.elicit(f"Write {len(text)} characters to {name}?", Confirm)
    ok = answer.action == "accept" and answer.data.ok
    notes_store.log_call("confirm_write", {"name": name, "ok": ok, "text": text})
    if not ok:
        return f"not written: the user said no to {name}"
    return _guard(notes_store.write_note, name, text)


@server.tool()
async def summarize_note(name: str, ctx: Context) -> str:
    """Ask the client's model (sampling) to summarize the note."""
    text = _guard(notes_store.read_note, name)
    prompt = f"Summarize this note in five words: {text}"
    summary = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=32,
        related_request_id=ctx.request_id,
    )
    notes_store.log_call("summarize_note", {"name": name})
    content = summary.content
    said = content.text if isinstance(content, TextContent) else str(content)
    return f"summary of {name} by {summary.model}: {said}"


@server.tool()
async def list_client_roots(ctx: Context) -> str:
    """Ask the client for its roots (roots/list) and name them."""
    roots = await ctx.session.list_roots()
    notes_store.log_call("list_client_roots", {})
    return "roots: " + ", ".join(str(root.uri) for root in roots.roots)


@server.tool()
async def touch_note(name: str, ctx: Context) -> str:
    """Announce that note://<name> changed (notifications/resources/updated)."""
    notes_store.log_call("touch_note", {"name": name})
    uri = f"note://{name}"
    await ctx.session.send_resource_updated(uri)
    return f"touched {uri}"


@server.resource("note://{name}")
def note_resource(name: str) -> str:
    """A note as a resource."""
    return _guard(notes_store.read_note, name)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument(
        "--port", type=int, default=0, help="HTTP port on 127.0.0.1 (required for http)"
    )
    parser.add_argument("--json-response", action="store_true", help="HTTP: answer JSON, not SSE")
    parser.add_argument("--stateless", action="store_true", help="HTTP: no Mcp-Session-Id")
    args = parser.parse_args()
    notes_store.notes_dir()
    if args.transport == "stdio":
        server.run("stdio")
        return
    if args.port <= 0:
        parser.error("--transport http needs --port N (a free port; bound on 127.0.0.1 only)")
    server.settings.host = "127.0.0.1"
    server.settings.port = args.port
    server.settings.json_response = args.json_response
    server.settings.stateless_http = args.stateless
    server.run("streamable-http")


if __name__ == "__main__":
    main()
