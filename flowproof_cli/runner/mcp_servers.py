"""One flow's MCP servers, seen from the runner: set up, inject, collect, judge.

In order: `prepare()` resolves the servers and writes the stdio stand-ins' session files;
the runner binds a proxy listener for each of `http_ports()` and hands it to `bind()`;
`environment()` (and `handles()`) are what the agent is given; once the agent is done,
`verdict()` reads every server once: the hard failures (divergences, refusals), the soft
ones (a server never contacted, a lane replayed short), the calls and, at record, the
lanes; `close()` removes the session files.

Each transport is one small class: `StdioServer` reads its stand-ins' capture file,
`HttpServer` asks its session (`flowproof_cli.mcp.http`) of the flow's mode. At record each
call to a real server is bounded (`mcp/call_bound.py`): the server's `call_timeout`, else the
upstream timeout.

Faults (`at: mcp NAME call N`) reach each server's boundary, which applies them at record
and at replay alike (`mcp/faults.py`); `verdict()` says how many attempts each faulted.
"""

from __future__ import annotations

import os
import shlex
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.cassette.upstream import upstream_timeout
from flowproof_cli.errors import ConfigError, SpecError
from flowproof_cli.faults.plan import Fault, faults_to_document
from flowproof_cli.mcp.call_bound import CallBound
from flowproof_cli.mcp.capture import (
    ERROR,
    REFUSED,
    call_count,
    faults_applied,
    lane_from_capture,
    read_entries,
    stamped_client_messages,
    started,
    unanswered,
)
from flowproof_cli.mcp.faults import server_faults
from flowproof_cli.mcp.http import HttpMcpSession
from flowproof_cli.mcp.http_record import HttpRecordSession
from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.lane import Lane, lane_to_document
from flowproof_cli.mcp.mocks import lane_schemas, schema_problems
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.mcp.stdio import StandinSession
from flowproof_cli.mcp.turns import Turns, misplaced_call, stamp_lane
from flowproof_cli.mode import Mode
from flowproof_cli.process import held_temp_folder, remove_held_folder, split_command
from flowproof_cli.spec.fields import url_problem
from flowproof_cli.spec.tools import McpServerSpec
from flowproof_cli.spec.variables import find_variables


def call_bound(spec: McpServerSpec, environ: Mapping[str, str]) -> CallBound:
    """How long each call to the real server may wait at record: the server's
    `call_timeout`, else the upstream timeout (the model's wait, 120 s by default)."""
    if spec.call_timeout is not None:
        return CallBound(spec.call_timeout, from_spec=True)
    return CallBound(upstream_timeout(environ))


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
    #: record: calls a real server had not answered when the agent ended (in `soft` too;
    #: also said beside a timeout, which they may explain)
    waiting: list[str] = field(default_factory=list)
    #: A conversation's: the turn each failure above belongs to, by its text.
    turns: dict[str, int] = field(default_factory=dict)
    #: fault.label -> attempts the boundaries answered with it (never applied: absent).
    applied: dict[str, int] = field(default_factory=dict)
    #: fault.label -> why it cannot apply (no MCP fault is ever inapplicable: its call is a
    #: tools/call, which every kind can answer; kept for the runner's one shape).
    not_applicable: dict[str, str] = field(default_factory=dict)

    @classmethod
    def none(cls) -> McpVerdict:
        return cls([], [], {}, 0)


class McpServer(ABC):
    """One declared server of the flow, whatever its transport."""

    #: `${flowproof.<kind>.<name>}`, the handle agent.env can name it by.
    handle_kind: ClassVar[str]

    def __init__(
        self, spec: McpServerSpec, mode: Mode, recorded: Lane, faults: tuple[Fault, ...] = ()
    ):
        self.spec = spec
        self.mode = mode
        self.recorded = recorded  # replay: the lane of the trace (record: empty)
        self.faults = server_faults(faults, spec.name)

    @property
    def name(self) -> str:
        return self.spec.name

    @abstractmethod
    def target(self) -> str:
        """What the agent's MCP config points at: a command line or a url."""

    @abstractmethod
    def collect(self) -> None:
        """Read what crossed the boundary, once the agent is done (before any verdict)."""

    @abstractmethod
    def lane(self) -> Lane: ...

    @abstractmethod
    def calls(self) -> int: ...

    @abstractmethod
    def hard_failures(self) -> list[str]:
        """Divergences and refusals: the flow fails whatever the agent did with them."""

    def soft_failures(self) -> list[str]:
        """The server never contacted (when it had to be), else what the replay left."""
        if not self._contacted() and (self.mode is Mode.RECORD or self.recorded.calls):
            return [self._never_contacted()]
        return self._replay_failures()

    @abstractmethod
    def _contacted(self) -> bool: ...

    @abstractmethod
    def _never_contacted(self) -> str: ...

    @abstractmethod
    def _replay_failures(self) -> list[str]: ...

    def waiting(self) -> list[str]:
        """Record: calls the real server had not answered when the agent ended."""
        return []

    @abstractmethod
    def close(self) -> None:
        """Nothing of the server stays open once the flow is judged."""

    def replayer(self) -> Replayer | None:
        """Replay: what answered the agent from the lane, once collected."""
        return None

    @abstractmethod
    def applied(self) -> dict[str, int]:
        """fault.label -> attempts answered with it, once collected."""


class StdioServer(McpServer):
    """A `command:` server: the agent launches flowproof's stand-in, which captures."""

    handle_kind = "mcp_server"

    def __init__(
        self,
        spec: McpServerSpec,
        mode: Mode,
        recorded: Lane,
        *,
        folder: Path,
        environ: Mapping[str, str],
        cwd: Path,
        python: str | None = None,
        bound: CallBound | None = None,
        faults: tuple[Fault, ...] = (),
    ):
        super().__init__(spec, mode, recorded, faults)
        self.python = python
        self.bound = bound  # record: each call's bound
        self.session_file = folder / f"{spec.name}.session.json"
        self.capture = folder / f"{spec.name}.capture.jsonl"
        self._entries: list[dict[str, Any]] = []
        self._replayer: Replayer | None = None
        record = mode is Mode.RECORD
        StandinSession(
            server=spec.name,
            mode=mode,
            capture=str(self.capture),
            command=split_command(spec.resolved_command(environ)) if record else [],
            cwd=os.path.realpath(cwd),  # the stand-in runs wherever the agent starts it
            mocks=spec.mocks,
            lane=None if record else lane_to_document(recorded),
            call_timeout_s=bound.seconds if bound is not None else None,
            call_timeout_set=bound is not None and bound.from_spec,
            faults=faults_to_document(self.faults),
        ).write(self.session_file)

    def target(self) -> str:
        return shlex.join(standin_command(self.name, self.session_file, self.python))

    def collect(self) -> None:
        """Read the capture file; at replay, replay the lane against what the agent sent
        (once: every verdict below reads this replayer)."""
        self._entries = read_entries(self.capture)
        if self.mode is Mode.REPLAY:
            self._replayer = Replayer(self.name, self.recorded, self.spec.mocks, self.faults)
            for message, at in stamped_client_messages(self._entries):
                self._replayer.receive(message, at)

    def replayer(self) -> Replayer | None:
        return self._replayer

    def applied(self) -> dict[str, int]:
        if self._replayer is not None:
            return self._replayer.applied
        return faults_applied(self._entries)

    def lane(self) -> Lane:
        return lane_from_capture(self._entries)[0]

    def calls(self) -> int:
        return call_count(self._entries)

    def hard_failures(self) -> list[str]:
        failures = [str(e.get("text")) for e in self._entries if e.get("k") in (ERROR, REFUSED)]
        if self._replayer is not None and self._replayer.divergence is not None:
            failures.append(self._replayer.divergence)
        return failures

    def _contacted(self) -> bool:
        return started(self._entries)

    def _never_contacted(self) -> str:
        return (
            f"the agent never spawned flowproof's MCP stand-in for '{self.name}': "
            f"its MCP config must launch the command in ${self.spec.variable} in place of "
            "the server's own"
        )

    def _replay_failures(self) -> list[str]:
        return self._replayer.failures() if self._replayer is not None else []

    def soft_failures(self) -> list[str]:
        return [*super().soft_failures(), *self.waiting()]

    def waiting(self) -> list[str]:
        if self.mode is not Mode.RECORD or self.bound is None:
            return []
        bound = self.bound
        return [bound.unanswered_at_end(self.name, call) for call in unanswered(self._entries)]

    def close(self) -> None:
        """Nothing to close: the stand-ins end with the agent, the files with the flow."""


class HttpServer(McpServer):
    """A `url:` server: the agent talks to a proxy listener, answered by the session."""

    handle_kind = "mcp_url"

    def __init__(
        self,
        spec: McpServerSpec,
        mode: Mode,
        recorded: Lane,
        *,
        environ: Mapping[str, str],
        faults: tuple[Fault, ...] = (),
    ):
        super().__init__(spec, mode, recorded, faults)
        self.port = 0  # the bound listener port, once bound
        self.session: HttpMcpSession = (
            HttpRecordSession(
                spec.name,
                url=_dialable(spec, environ),
                mocks=spec.mocks,
                bound=call_bound(spec, environ),
                faults=self.faults,
            )
            if mode is Mode.RECORD
            else HttpReplaySession(spec.name, lane=recorded, mocks=spec.mocks, faults=self.faults)
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def target(self) -> str:
        return self.url

    def collect(self) -> None:
        """Nothing to read: the session kept count as the requests came."""

    def replayer(self) -> Replayer | None:
        return self.session.replayer if isinstance(self.session, HttpReplaySession) else None

    def applied(self) -> dict[str, int]:
        return self.session.applied

    def lane(self) -> Lane:
        return self.session.lane()

    def calls(self) -> int:
        return self.session.calls()

    def hard_failures(self) -> list[str]:
        divergence = self.session.divergence
        return [*self.session.errors, *([divergence] if divergence is not None else [])]

    def _contacted(self) -> bool:
        return self.session.contacted

    def _never_contacted(self) -> str:
        return (
            f"the agent never contacted flowproof's MCP listener for '{self.name}' "
            f"({self.url}): its MCP config must point that server at ${self.spec.variable}"
        )

    def _replay_failures(self) -> list[str]:
        return self.session.failures()

    def close(self) -> None:
        self.session.close()


def _dialable(spec: McpServerSpec, environ: Mapping[str, str]) -> str:
    """The server's URL with its `${VAR}` resolved, refused (naming the variables, never
    their values) when it is no http(s) URL flowproof can dial."""
    url = spec.resolved_url(environ)
    problem = url_problem(url)
    if problem is not None:
        variables = ", ".join(find_variables(spec.url or ""))
        raise ConfigError(
            f"mcp.{spec.name}.url resolves to no http(s) URL: {problem} (its value comes from "
            f"{variables}). Fix: set {variables} to the server's URL, e.g. "
            "http://127.0.0.1:8931/mcp"
        )
    return url


class McpServers:
    def __init__(
        self,
        servers: Sequence[McpServerSpec],
        *,
        mode: Mode,
        environ: Mapping[str, str],
        cwd: Path,
        lanes: Mapping[str, Lane] | None = None,
        python: str | None = None,
        faults: tuple[Fault, ...] = (),
    ):
        """`faults`: the flow's (the spec's and any injected at replay), every boundary's;
        each server takes those `at: mcp <its name> call N`."""
        self.mode = Mode(mode)
        self.faults = tuple(f for f in faults if f.at.boundary == "mcp")
        self.environ = dict(environ)
        self.cwd = cwd
        self.recorded_lanes = dict(lanes or {})
        self.python = python
        self.specs = list(servers)
        self.servers: list[McpServer] = []
        self._folder: Path | None = None

    def prepare(self) -> None:
        """Resolve every server (unset `${VAR}` is a ConfigError) and write stdio sessions."""
        declared = {spec.name for spec in self.specs}
        for fault in self.faults:
            if fault.at.server not in declared:
                where = f" (line {fault.line})" if fault.line is not None else ""
                raise SpecError(
                    f"the fault `{fault.label}`{where} names the MCP server "
                    f"'{fault.at.server}', which the spec does not declare under `mcp` "
                    f"(declared: {', '.join(sorted(declared)) or 'none'})"
                )
        for spec in self.specs:
            lane = self.recorded_lanes.get(spec.name, Lane())
            problems = schema_problems(spec.name, spec.mocks, lane_schemas(lane))
            if problems:  # replay: the trace's tools/list knows the outputSchemas up front
                raise SpecError("\n".join(problems))
            self.servers.append(self._server(spec, lane))

    def _server(self, spec: McpServerSpec, lane: Lane) -> McpServer:
        if spec.command is None:
            return HttpServer(spec, self.mode, lane, environ=self.environ, faults=self.faults)
        return StdioServer(
            spec,
            self.mode,
            lane,
            folder=self._temp_folder(),
            environ=self.environ,
            cwd=self.cwd,
            python=self.python,
            bound=call_bound(spec, self.environ) if self.mode is Mode.RECORD else None,
            faults=self.faults,
        )

    def _temp_folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(held_temp_folder("flowproof-mcp-"))  # goes even if killed
        return self._folder

    # -- listeners (streamable HTTP) -------------------------------------------------------

    def http_ports(self) -> list[tuple[str, int]]:
        """(server name, requested port; 0 = any) of every url server."""
        return [(s.name, s.spec.port or 0) for s in self.servers if isinstance(s, HttpServer)]

    def bind(self, name: str, port: int) -> HttpMcpSession:
        server = next(s for s in self.servers if isinstance(s, HttpServer) and s.name == name)
        server.port = port
        return server.session

    # -- what the agent is given -----------------------------------------------------------

    def environment(self) -> dict[str, str]:
        return {server.spec.variable: server.target() for server in self.servers}

    def handles(self) -> dict[str, str]:
        """`${flowproof.mcp_url.<name>}` / `${flowproof.mcp_server.<name>}` for agent.env."""
        return {f"{s.handle_kind}.{s.name}": s.target() for s in self.servers}

    # -- after the agent -------------------------------------------------------------------

    def verdict(self, conversation: OpenTurn | None = None) -> McpVerdict:
        """Everything the runner needs, read once, before `close()` removes the captures.
        In a conversation (`conversation`: the session's turns) each recorded call carries
        its turn, and at replay a call made in another turn than recorded fails the flow,
        like a divergence, and every failure names its turn (mcp/turns.py)."""
        for server in self.servers:
            server.collect()
        turns = Turns(conversation.opened_at, conversation.messages) if conversation else None
        by_turn: dict[str, int] = {}
        hard = [
            f for s in self.servers for f in self._in_turns(s, s.hard_failures(), turns, by_turn)
        ]
        hard = _unique([*hard, *self._misplaced(turns, by_turn), *self._stale()])
        soft = _unique(
            [f for s in self.servers for f in self._in_turns(s, s.soft_failures(), turns, by_turn)]
        )
        counts = {server.name: server.calls() for server in self.servers}
        lanes = {s.name: s.lane() for s in self.servers} if self.mode is Mode.RECORD else {}
        for lane in lanes.values():
            if turns is not None:
                stamp_lane(lane, turns.opened)
        return McpVerdict(
            hard=hard,
            soft=[failure for failure in soft if failure not in hard],
            lanes=lanes,
            calls=sum(counts.values()),
            per_server=counts,
            waiting=[call for server in self.servers for call in server.waiting()],
            turns=by_turn,
            applied={k: v for s in self.servers for k, v in s.applied().items()},
        )

    def _misplaced(self, turns: Turns | None, by_turn: dict[str, int]) -> list[str]:
        """Replay, in a conversation: each server's first call made in another turn than
        the one the recording has it in."""
        found: list[str] = []
        for server in self.servers:
            replayer = server.replayer()
            if turns is None or replayer is None:
                continue
            misplaced = misplaced_call(server.name, replayer.lane, replayer.arrivals, turns)
            if misplaced is not None:
                turn, failure = misplaced
                by_turn[failure] = turn
                found.append(failure)
        return found

    @staticmethod
    def _in_turns(
        server: McpServer, failures: list[str], turns: Turns | None, by_turn: dict[str, int]
    ) -> list[str]:
        """Replay, in a conversation: a divergence worded by the turn of the call that
        diverged (an extra call, a changed one), a lane replayed short by the turn of the
        first call never made."""
        replayer = server.replayer()
        if turns is None or replayer is None:
            return failures
        calls, made = replayer.lane.calls, len(replayer.arrived)
        worded = []
        for failure in failures:
            turn: int | None = None
            if failure == replayer.divergence:
                turn = turns.at(replayer.diverged_at)
            elif replayer.divergence is None and made < len(calls):
                turn = calls[made].conversation_turn
            said = failure if turn is None else f"{turns.label(turn)}: {failure}"
            if turn is not None:
                by_turn[said] = turn
            worded.append(said)
        return worded

    def _stale(self) -> list[str]:
        """Replay: lanes of the trace whose server the spec no longer declares."""
        if self.mode is not Mode.REPLAY:
            return []
        declared = {spec.name for spec in self.specs}
        return [
            f"the trace has a lane for the MCP server '{name}', which the spec no longer "
            "declares under `mcp`; re-record the flow"
            for name in sorted(self.recorded_lanes)
            if name not in declared
        ]

    def close(self) -> None:
        for server in self.servers:
            server.close()
        if self._folder is not None:
            remove_held_folder(str(self._folder))
            self._folder = None


def _unique(failures: list[str]) -> list[str]:
    return list(dict.fromkeys(failures))
