"""What the scripted MCP client "agents" share (no `mcp` import here, so 1.x and 2.x both use it).

A client finds its server the way an agent configured by flowproof does:
- stdio: env `FLOWPROOF_MCP_SERVER_<NAME>` (a shell command line), else `--server-cmd`;
- http:  env `FLOWPROOF_MCP_URL_<NAME>` (http://127.0.0.1:<port>/mcp), else `--url`.
NAME is the server name upper-cased with every other character turned into `_` (notes -> NOTES).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

CANNED_SAMPLE = "a canned summary from the client"
CANNED_MODEL = "canned-model"
STEPS = ("write", "read", "slow", "elicit", "sample", "roots", "touch")


def env_name(server: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", server.upper())


@dataclass
class Target:
    transport: str
    source: str  # which variable or option named the server
    argv: list[str] = field(default_factory=list)
    url: str = ""


def add_target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--name", default="notes", help="server name (env suffix); default notes")
    parser.add_argument("--server-cmd", help="stdio server command line (fallback)")
    parser.add_argument("--url", help="streamable HTTP url (fallback)")


def resolve_target(args: argparse.Namespace, prog: str) -> Target:
    suffix = env_name(args.name)
    if args.transport == "stdio":
        var = f"FLOWPROOF_MCP_SERVER_{suffix}"
        command = os.environ.get(var) or args.server_cmd
        if not command:
            fail(prog, f"no stdio server: set {var} or pass --server-cmd", code=2)
        argv = shlex.split(command)
        if not argv:
            fail(
                prog,
                f"empty stdio server command from {var if os.environ.get(var) else '--server-cmd'}",
                2,
            )
        return Target("stdio", var if os.environ.get(var) else "--server-cmd", argv=argv)
    var = f"FLOWPROOF_MCP_URL_{suffix}"
    url = os.environ.get(var) or args.url
    if not url:
        fail(prog, f"no server url: set {var} or pass --url", code=2)
    return Target("http", var if os.environ.get(var) else "--url", url=url)


def parse_steps(raw: str, prog: str) -> list[str]:
    steps = [s.strip() for s in raw.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        fail(prog, f"unknown step(s) {unknown}; known: {', '.join(STEPS)}", code=2)
    return steps


def note_name() -> str:
    return os.environ.get("NOTE_NAME", "a.txt")


def note_text() -> str:
    return os.environ.get("NOTE_TEXT", "hello")


def step_call(step: str, slow_n: int) -> tuple[str, dict[str, Any]]:
    """The tool call (name, arguments) a step makes on the notes server."""
    name, text = note_name(), note_text()
    return {
        "write": ("write_note", {"name": name, "text": text}),
        "read": ("read_note", {"name": name}),
        "slow": ("slow_count", {"n": slow_n, "delay": 0.1}),
        "elicit": ("confirm_write", {"name": name, "text": text}),
        "sample": ("summarize_note", {"name": name}),
        "roots": ("list_client_roots", {}),
        "touch": ("touch_note", {"name": name}),
    }[step]


def elicit_content() -> dict[str, Any]:
    raw = os.environ.get("ELICIT_CONTENT", '{"ok": true}')
    try:
        content = json.loads(raw)
    except json.JSONDecodeError as exc:
        fail("client", f"ELICIT_CONTENT is not JSON: {exc}", code=2)
    return content


def root_uri() -> str:
    return os.environ.get("ROOT_URI", "file:///tmp/flowproof-notes")


def text_of(content: list[Any]) -> str:
    return "".join(getattr(block, "text", "") or "" for block in content)


def describe_error(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_error(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def fail(prog: str, message: str, code: int = 1) -> None:
    print(f"{prog}: {message}", file=sys.stderr)
    raise SystemExit(code)


def emit(summary: dict[str, Any], prog: str) -> int:
    print(json.dumps(summary, indent=2, sort_keys=True, default=str))
    failed = [c["tool"] for c in summary.get("calls", []) if c.get("is_error")]
    if failed:
        print(f"{prog}: tool call(s) returned isError: {failed}", file=sys.stderr)
        return 1
    return 0
