"""Flows over the real MCP fixtures (tests/mcp_fixtures/README.md), run through the CLI."""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO, CliResult, clean_environ, run_cli
from tests.e2e.sockets_and_pids import free_port
from tests.fakes.fake_upstream import FakeUpstream, Script

FIXTURES = REPO / "tests" / "mcp_fixtures"
PY = sys.executable
NOTES_V2 = FIXTURES / "py_server_v2.py"
NOTES_V1 = FIXTURES / "py_server_v1.py"
EVERYTHING = FIXTURES / "run_everything.sh"
FILESYSTEM = (
    REPO / "tests" / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist"
)
#: Record needs a model upstream configured even when the agent calls no model.
NO_MODEL = {"FLOWPROOF_AGENT_UPSTREAM": "http://127.0.0.1:9/v1"}


def client(script: str, *args: str) -> list[str]:
    return [PY, str(FIXTURES / script), *args]


def _wait_for(port: int, process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


@contextlib.contextmanager
def http_server(argv: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """A real streamable-HTTP server on a free loopback port; stopped on exit."""
    port = free_port()
    variables = clean_environ({**(env or {}), "PORT": str(port)})
    command = [part.replace("{port}", str(port)) for part in argv]
    process = subprocess.Popen(
        command,
        env=variables,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        process.wait(timeout=10)


def notes_http(script: Path = NOTES_V2) -> list[str]:
    return [PY, str(script), "--transport", "http", "--port", "{port}"]


def everything_http() -> list[str]:
    return [str(EVERYTHING), "streamableHttp"]


def write_flow(
    folder: Path,
    agent: list[str],
    servers: list[dict[str, Any]],
    *,
    name: str = "mcp",
    env: dict[str, str] | None = None,
    **extra: Any,
) -> Path:
    spec: dict[str, Any] = {
        "name": f"{name} flow",
        "app": "agent",
        "agent": {"command": shlex.join(agent), "env": env or {}},
        "mcp": servers,
        "steps": [{"prompt": "Use the MCP server."}],
        **extra,
    }
    path = folder / f"{name}.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def stdio_notes_flow(
    folder: Path, agent: list[str], env: dict[str, str] | None = None, **extra: Any
) -> Path:
    """`agent` against the notes server over stdio, its notes in `folder`/notes (`env`: more
    of the agent's environment; `extra`: more of the flow, as `write_flow` takes it)."""
    notes = [{"name": "notes", "command": f"{PY} {NOTES_V2}"}]
    variables = {"NOTES_DIR": str(folder / "notes"), **(env or {})}
    return write_flow(folder, agent, notes, env=variables, **extra)


def write_notes_flow(
    folder: Path, name: str, agent: dict[str, Any], server: dict[str, Any], **extra: Any
) -> Path:
    """notes.flow.yaml: an `agent:` of its own (command, env, conversation) and one MCP
    server; `extra` holds the rest (steps, timeout)."""
    spec = {"name": name, "app": "agent", "agent": agent, "mcp": [server], **extra}
    path = folder / "notes.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def edit_flow(path: Path, **changes: Any) -> None:
    spec = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if key == "env":
            spec["agent"]["env"].update(value)
        elif key == "agent":
            spec["agent"]["command"] = shlex.join(value)
        else:
            spec[key] = value
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def trace_of(spec: Path) -> dict[str, Any]:
    return yaml.safe_load(spec.with_name(spec.name.replace(".flow.", ".trace.")).read_text())


def record(spec: Path, **env: str) -> CliResult:
    return run_cli("record", spec, env={**NO_MODEL, **env}, timeout=180)


def replay(spec: Path, **env: str) -> CliResult:
    return run_cli("run", spec, env=env, timeout=180)


def executed(notes_dir: Path) -> list[str]:
    """The tool calls the real notes server executed (its own log)."""
    log = notes_dir / "server.log"
    return log.read_text().splitlines() if log.exists() else []


def record_with_notes(
    transport: str, notes: Path, script: Script, write: Callable[[dict[str, Any]], Path]
) -> tuple[Path, CliResult]:
    """Record the flow `write` makes for the notes server (its `mcp:` entry given) against
    the fake model playing `script`: over `stdio` (the stand-in starts the server) or `http`
    (a real server on a free port, stopped after). The flow's path and the record's result."""
    with FakeUpstream(script=script) as fake:
        upstream = {
            "FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1",
            "FLOWPROOF_AGENT_KEY": "sk-test",
        }
        if transport == "http":
            with http_server(notes_http(), {"NOTES_DIR": str(notes)}) as url:
                spec = write({"name": "notes", "url": url})
                return spec, run_cli("record", spec, env=upstream, timeout=180)
        spec = write({"name": "notes", "command": f"{PY} {NOTES_V2}"})
        return spec, run_cli("record", spec, env=upstream, timeout=180)
