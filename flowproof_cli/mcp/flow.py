"""One flow's MCP servers, seen from the runner: set up, inject, collect, judge.

In order: `prepare()` resolves the servers and writes the stdio stand-ins' session files;
the runner binds a proxy listener for each of `http_ports()` and hands it to `bind()`;
`environment()` (and `handles()`) are what the agent is given; once the agent is done,
`hard_failures()` (divergences, refusals), `soft_failures()` (a server never contacted, a
lane replayed short) and, at record, `lanes()`; `close()` removes the session files.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowproof_cli.errors import SpecError
from flowproof_cli.mcp.canonical import PING
from flowproof_cli.mcp.capture import (
    START,
    client_messages,
    lane_from_capture,
    read_entries,
)
from flowproof_cli.mcp.http import HttpMcpSession
from flowproof_cli.mcp.lane import Lane, lane_to_document
from flowproof_cli.mcp.mocks import lane_schemas, schema_problems
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.mcp.stdio import ERROR, REFUSED, StandinSession
from flowproof_cli.runner.command import split_command
from flowproof_cli.spec.models import McpServerSpec

RECORD = "record"
REPLAY = "replay"


def standin_command(server: str, session_file: Path, python: str | None = None) -> list[str]:
    """The stand-in's command line: absolute interpreter, no reliance on PATH or env."""
    executable = python or sys.executable
    return [
        executable,
        "-m",
        "flowproof_cli",
        "mcp-stdio",
        "--server",
        server,
        "--session",
        str(session_file),
    ]


@dataclass
class McpVerdict:
    """What the runner keeps of a flow's MCP servers once the agent is done."""

    hard: list[str]  # divergences and refusals: judged like a model divergence
    soft: list[str]  # never contacted, replayed short, a request never answered
    lanes: dict[str, Lane]  # record: what goes into the trace
    calls: int  # requests the agent made to its MCP servers
    per_server: dict[str, int] = field(default_factory=dict)  # the same, by server name

    @classmethod
    def none(cls) -> McpVerdict:
        return cls([], [], {}, 0)


@dataclass
class _Server:
    spec: McpServerSpec
    session_file: Path | None = None  # stdio
    capture: Path | None = None  # stdio
    http: HttpMcpSession | None = None
    port: int = 0  # http: the bound listener port

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


class McpFlow:
    def __init__(
        self,
        servers: Sequence[McpServerSpec],
        *,
        mode: str,
        environ: Mapping[str, str],
        cwd: Path,
        lanes: Mapping[str, Lane] | None = None,
        python: str | None = None,
    ):
        self.mode = mode
        self.environ = dict(environ)
        self.cwd = cwd
        self.recorded_lanes = dict(lanes or {})
        self.python = python
        self.servers = [_Server(spec) for spec in servers]
        self._folder: Path | None = None

    def prepare(self) -> None:
        """Resolve every server (unset `${VAR}` is a ConfigError) and write stdio sessions."""
        for server in self.servers:
            spec = server.spec
            lane = self.recorded_lanes.get(spec.name, Lane())
            problems = schema_problems(spec.name, spec.mocks, lane_schemas(lane))
            if problems:  # replay: the trace's tools/list knows the outputSchemas up front
                raise SpecError("\n".join(problems))
            if spec.command is not None:
                command = (
                    split_command(spec.resolved_command(self.environ))
                    if (self.mode == RECORD)
                    else []
                )
                folder = self._temp_folder()
                server.session_file = folder / f"{spec.name}.session.json"
                server.capture = folder / f"{spec.name}.capture.jsonl"
                StandinSession(
                    server=spec.name,
                    mode=self.mode,
                    capture=str(server.capture),
                    command=command,
                    cwd=str(self.cwd),
                    mocks=spec.mocks,
                    lane=lane_to_document(lane) if self.mode == REPLAY else None,
                ).write(server.session_file)
            else:
                url = spec.resolved_url(self.environ) if self.mode == RECORD else None
                server.http = HttpMcpSession(
                    spec.name, mode=self.mode, url=url, lane=lane, mocks=spec.mocks
                )

    def _temp_folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="flowproof-mcp-"))
        return self._folder

    # -- listeners (streamable HTTP) -------------------------------------------------------

    def http_ports(self) -> list[tuple[str, int]]:
        """(server name, requested port; 0 = any) of every url server."""
        return [(s.name, s.spec.port or 0) for s in self.servers if s.http is not None]

    def bind(self, name: str, port: int) -> HttpMcpSession:
        server = self._named(name)
        assert server.http is not None
        server.port = port
        return server.http

    def _named(self, name: str) -> _Server:
        return next(server for server in self.servers if server.name == name)

    # -- what the agent is given -----------------------------------------------------------

    def environment(self) -> dict[str, str]:
        variables: dict[str, str] = {}
        for server in self.servers:
            variables[server.spec.variable] = self._target(server)
        return variables

    def handles(self) -> dict[str, str]:
        """`${flowproof.mcp_url.<name>}` / `${flowproof.mcp_server.<name>}` for agent.env."""
        handles: dict[str, str] = {}
        for server in self.servers:
            kind = "mcp_server" if server.spec.command is not None else "mcp_url"
            handles[f"{kind}.{server.name}"] = self._target(server)
        return handles

    def _target(self, server: _Server) -> str:
        if server.session_file is not None:
            return shlex.join(standin_command(server.name, server.session_file, self.python))
        return server.url

    # -- after the agent -------------------------------------------------------------------

    def lanes(self) -> dict[str, Lane]:
        """Record: the lane of every declared server (empty lanes included)."""
        lanes: dict[str, Lane] = {}
        for server in self.servers:
            if server.capture is not None:
                lanes[server.name], _ = lane_from_capture(read_entries(server.capture))
            elif server.http is not None:
                lanes[server.name] = server.http.lane()
        return lanes

    def call_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for server in self.servers:
            if server.capture is not None:
                counts[server.name] = len(
                    [m for m in client_messages(read_entries(server.capture)) if _is_request(m)]
                )
            elif server.http is not None:
                counts[server.name] = (
                    len(server.http.lane().calls)
                    if self.mode == RECORD
                    else len(server.http.replayer.arrived)
                )
        return counts

    def verdict(self) -> McpVerdict:
        """Everything the runner needs, read before `close()` removes the captures."""
        counts = self.call_counts()
        return McpVerdict(
            hard=self.hard_failures(),
            soft=self.soft_failures(),
            lanes=self.lanes() if self.mode == RECORD else {},
            calls=sum(counts.values()),
            per_server=counts,
        )

    def hard_failures(self) -> list[str]:
        """Divergences and refusals: the flow fails whatever the agent did with them."""
        failures: list[str] = []
        for server in self.servers:
            if server.capture is not None:
                entries = read_entries(server.capture)
                failures += [str(e.get("text")) for e in entries if e.get("k") in (ERROR, REFUSED)]
                if self.mode == REPLAY:
                    replayer = self._stdio_replayer(server, entries)
                    if replayer.divergence is not None:
                        failures.append(replayer.divergence)
            elif server.http is not None:
                failures += server.http.errors
                if self.mode == REPLAY and server.http.replayer.divergence is not None:
                    failures.append(server.http.replayer.divergence)
        failures += self._stale_lanes()
        return list(dict.fromkeys(failures))

    def soft_failures(self) -> list[str]:
        """A server never contacted, a lane replayed short, a request never answered."""
        failures: list[str] = []
        for server in self.servers:
            variable = server.spec.variable
            if server.capture is not None:
                entries = read_entries(server.capture)
                started = any(entry.get("k") == START for entry in entries)
                lane = self.recorded_lanes.get(server.name, Lane())
                if not started and (self.mode == RECORD or lane.calls):
                    failures.append(
                        f"the agent never spawned flowproof's MCP stand-in for '{server.name}': "
                        f"its MCP config must launch the command in ${variable} in place of "
                        "the server's own"
                    )
                    continue
                if self.mode == REPLAY:
                    failures += self._stdio_replayer(server, entries).failures()
            elif server.http is not None:
                lane = self.recorded_lanes.get(server.name, Lane())
                if not server.http.contacted and (self.mode == RECORD or lane.calls):
                    failures.append(
                        f"the agent never contacted flowproof's MCP listener for '{server.name}' "
                        f"({server.url}): its MCP config must point that server at ${variable}"
                    )
                    continue
                if self.mode == REPLAY:
                    failures += server.http.replayer.failures()
        return [f for f in dict.fromkeys(failures) if f not in self.hard_failures()]

    def _stdio_replayer(self, server: _Server, entries: list[dict[str, Any]]) -> Replayer:
        replayer = Replayer(
            server.name, self.recorded_lanes.get(server.name, Lane()), server.spec.mocks
        )
        for message in client_messages(entries):
            replayer.receive(message)
        return replayer

    def _stale_lanes(self) -> list[str]:
        if self.mode != REPLAY:
            return []
        declared = {server.name for server in self.servers}
        return [
            f"the trace has a lane for the MCP server '{name}', which the spec no longer "
            "declares under `mcp`; re-record the flow"
            for name in sorted(self.recorded_lanes)
            if name not in declared
        ]

    def close(self) -> None:
        for server in self.servers:
            if server.http is not None:
                server.http.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


def _is_request(message: Any) -> bool:
    """A call of the lane: a request other than `ping` (kept out of lanes, like over HTTP)."""
    return (
        isinstance(message, dict)
        and "method" in message
        and message.get("id") is not None
        and message["method"] != PING
    )
