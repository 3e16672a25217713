"""A real notes MCP server on the `mcp` 2.x SDK (`MCPServer`), over stdio or streamable HTTP.

Usage:
    NOTES_DIR=/tmp/notes python py_server_v2.py [--transport stdio|http] [--port N]
        [--json-response] [--stateless]

Tools: read_note, write_note (writes NOTES_DIR/<name>), slow_count (progress notifications),
confirm_write (elicitation), summarize_note (sampling), list_client_roots (roots/list),
touch_note (a resources/updated notification). Every executed tool call appends one line to
NOTES_DIR/server.log (see notes_store.py). HTTP binds 127.0.0.1 only, path /mcp.

Serves both protocol eras: the handshake era (initialize; elicitation, sampling and roots as
server-to-client requests) and 2026-07-28 (server/discover; the same three as an
`input_required` result the client answers by retrying the call).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Annotated

sys.path.insert(0, str(Path(__file__).resolve().parent))

import notes_store
import sdk_path

sdk_path.use_mcp2()  # before any `mcp` import

try:
    import anyio
    from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
    from pydantic import BaseModel, Field
except ImportError as exc:
    sys.exit(f"py_server_v2: needs the mcp 2.x SDK (the venv's): {exc}")

server = MCPServer("notes", version="2", instructions="A notes server for flowproof's MCP tests.")


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await ctx.info(f"counted to {n}")
    return f"counted to {n}"


class Confirm(BaseModel):
    ok: bool = Field(description="Write the note?")


def ask_confirm(name: str, text: str) -> Elicit[Confirm]:
    return Elicit(f"Write {len(text)} characters to {name}?", Confirm)


@server.tool()
def confirm_write(name: str, text: str, answer: Annotated[Confirm, Resolve(ask_confirm)]) -> str:
    """Ask the user (elicitation) before writing the note."""
    notes_store.log_call("confirm_write", {"name": name, "ok": answer.ok, "text": text})
    if not answer.ok:
        return f"not written: the user said no to {name}"
    return _guard(notes_store.write_note, name, text)


def ask_summary(name: str) -> Sample:
    text = _guard(notes_store.read_note, name)
    prompt = f"Summarize this note in five words: {text}"
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))], max_tokens=32
    )


@server.tool()
def summarize_note(name: str, summary: Annotated[CreateMessageResult, Resolve(ask_summary)]) -> str:
    """Ask the client's model (sampling) to summarize the note."""
    notes_store.log_call("summarize_note", {"name": name})
    content = summary.content
    text = content.text if isinstance(content, TextContent) else str(content)
    return f"summary of {name} by {summary.model}: {text}"


def get_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def list_client_roots(roots: Annotated[ListRootsResult, Resolve(get_roots)]) -> str:
    """Ask the client for its roots (roots/list) and name them."""
    notes_store.log_call("list_client_roots", {})
    return "roots: " + ", ".join(str(root.uri) for root in roots.roots)


@server.tool()
async def touch_note(name: str, ctx: Context) -> str:
    """Announce that note://<name> changed (notifications/resources/updated)."""
    notes_store.log_call("touch_note", {"name": name})
    uri = f"note://{name}"
    await ctx.notify_resource_updated(uri)  # 2026-07-28: subscriptions/listen streams
    if ctx.protocol_version and ctx.protocol_version < "2026":
        await ctx.session.send_resource_updated(uri)  # handshake era: a plain notification
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
    notes_store.notes_dir()  # fail early and clearly when NOTES_DIR is missing
    if args.transport == "stdio":
        server.run("stdio")
        return
    if args.port <= 0:
        parser.error("--transport http needs --port N (a free port; bound on 127.0.0.1 only)")
    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=args.port,
        json_response=args.json_response,
        stateless_http=args.stateless,
    )


if __name__ == "__main__":
    main()
