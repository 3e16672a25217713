"""The trace: a versioned, committed, reviewable record of one flow's boundary traffic.

Layout (YAML; docs/trace-format.md is the reference):

    flowproof_trace: 2          # format version (1 is still read)
    flow: <spec name>
    mocks: {tool: result}       # the spec's tools: mocks, snapshotted
    mock_results: {tool: [...]} # the `results:` sequences, snapshotted; omitted when none
    match: [{ignore: path}, ...] # the match rules in force, snapshotted; omitted when none
    faults: [{at, kind, value, retry_after, times}] # the flow's faults; omitted when none
    conversation:               # a conversation flow's user side; omitted in one turn
      id: <conversation_id>     # what a url agent's turns carried (trace/conversation.py)
      turns: [{user: <message>}, ...]
      user: [{step, protocol, request, answer}, ...]  # a simulated user's calls, if any
    turns:                      # model turns in recorded order
      - protocol: <tag>         # omitted for openai-chat, the default
        agent: <product/version> # who sent it, from its User-Agent; omitted when unknown
        transport: websocket    # asked as a WebSocket frame; omitted over HTTP
        conversation_turn: 2    # the conversation turn it was made in; omitted in one turn
        fault: "model call 2: answer: 429"  # the fault that hit the call; omitted when none
        request: {...}          # canonical request, keys sorted
        response: {status: 200, body: {...}}
    egress:                     # omitted unless a contained run refused something
      blocked: [{destination: 203.0.113.7:443, protocol: tcp, at_ms: 412}]
    mcp:                        # one lane per MCP server; omitted when there are none
      <server>: {calls: [...], server: [...]}   # see flowproof_cli/mcp/lane.py
    end_of_trace: true          # always last (version 2): a trace cut short lacks it

Never headers, never keys: only bodies cross into this file (and, per turn, the agent's
product and version as its User-Agent names them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowproof_cli.canonical import sorted_keys
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.dialects import dialect_named
from flowproof_cli.dialects.base import Dialect, ResultSequence
from flowproof_cli.dialects.websocket import WEBSOCKET
from flowproof_cli.errors import TraceError
from flowproof_cli.faults.plan import Fault, faults_from_document, faults_to_document
from flowproof_cli.mcp.lane import Lane, lane_from_document, lane_to_document
from flowproof_cli.routes import DEFAULT_PROTOCOL
from flowproof_cli.trace.conversation import (
    RecordedConversation,
    conversation_from_document,
    conversation_to_document,
)
from flowproof_cli.trajectory import EndpointCall

FORMAT_VERSION = 2
#: The versions this flowproof reads. Version 1 has no END_KEY, so a version 1 trace cut at
#: the end of a line cannot be told from a whole one; re-recording writes version 2.
READ_VERSIONS = (1, 2)
#: The transports a turn may name (`transport:`); a turn asked over HTTP names none.
TRANSPORTS = (WEBSOCKET,)
#: The last key of every trace of version 2: whatever cuts the end off a trace takes it.
END_KEY = "end_of_trace"
#: The fix of every trace that cannot be read: the file is written by flowproof, so an
#: unreadable one was edited, cut or damaged after it was recorded.
FIX = (
    "Fix: undo the edit (restore the file from version control), or re-record the flow with "
    "`flowproof record <spec>`"
)


@dataclass
class Trace:
    flow: str
    turns: list[Turn] = field(default_factory=list)
    mocks: dict[str, Any] = field(default_factory=dict)
    version: int = FORMAT_VERSION
    #: Destinations the contained agent was refused ({destination, protocol, at_ms}); only a
    #: contained run has any, and an empty list leaves the document byte-identical.
    egress_blocked: list[dict[str, Any]] = field(default_factory=list)
    #: MCP server name -> its lane (flowproof_cli/mcp/lane.py); empty: no `mcp` key.
    mcp: dict[str, Lane] = field(default_factory=dict)
    #: The match rules in force when recorded (like mocks); empty: no `match` key.
    match: list[dict[str, Any]] = field(default_factory=list)
    #: A conversation flow's messages and id; None: recorded as a one-turn flow.
    conversation: RecordedConversation | None = None
    #: The flow's faults it was recorded with (flowproof_cli/faults/); empty: no `faults`.
    faults: tuple[Fault, ...] = ()


@dataclass(frozen=True)
class Lines:
    """Where the parts of a trace start in its file (1-based), for error messages: the
    top-level keys, each turn, each MCP server under `mcp`, and the file's last line.
    Empty: not known."""

    keys: Mapping[str, int] = field(default_factory=dict)
    turns: Sequence[int] = ()
    servers: Mapping[str, int] = field(default_factory=dict)
    last: int = 0


class _Where:
    """`FILE:LINE` of a part of the trace (`FILE` alone when its line is not known)."""

    def __init__(self, source: str, lines: Lines):
        self.source = source
        self.lines = lines

    def at(self, line: int | None) -> str:
        return f"{self.source}:{line}" if line else self.source

    def key(self, name: str) -> str:
        return self.at(self.lines.keys.get(name))

    def turn(self, number: int) -> str:
        turns = self.lines.turns
        return self.at(turns[number - 1] if number <= len(turns) else self.lines.keys.get("turns"))

    def server(self, name: str) -> str:
        return self.at(self.lines.servers.get(name) or self.lines.keys.get("mcp"))


def trace_error(at: str, problem: str) -> TraceError:
    """`FILE[:LINE]: problem. Fix: ...`: what every unreadable trace says."""
    return TraceError(f"{at}: {problem}. {FIX}")


def other_flow_note(trace: Trace, flow: str, source: str) -> str | None:
    """The note a failing replay carries when its trace was recorded for another flow.

    Not an error: a replay is judged by what the agent sends, and a trace may serve a flow
    renamed since, or a second flow checking the same recording (`run -t`). But when the
    replay fails, the names differing is the first thing to know."""
    if trace.flow == flow:
        return None
    return (
        f"{source} was recorded for the flow `{trace.flow}`, not `{flow}`: is it the trace of "
        "another flow? Fix: replay this flow's own trace, or re-record it; if you only "
        f"renamed the flow, set `flow: {flow}` in the trace"
    )


def to_document(trace: Trace) -> dict[str, Any]:
    turns = []
    for turn in trace.turns:
        entry: dict[str, Any] = {}
        if turn.protocol != DEFAULT_PROTOCOL:
            entry["protocol"] = turn.protocol
        if turn.agent is not None:  # absent when unknown, so older traces stay byte-identical
            entry["agent"] = turn.agent
        if turn.transport is not None:  # absent over HTTP, so older traces stay byte-identical
            entry["transport"] = turn.transport
        if turn.conversation_turn is not None:  # absent in a one-turn flow
            entry["conversation_turn"] = turn.conversation_turn
        if turn.fault is not None:  # absent when no fault hit the call
            entry["fault"] = turn.fault
        entry["request"] = sorted_keys(turn.request)
        entry["response"] = {"status": turn.status, "body": sorted_keys(turn.response)}
        turns.append(entry)
    singles = {k: v for k, v in trace.mocks.items() if not isinstance(v, ResultSequence)}
    sequences = {k: v for k, v in trace.mocks.items() if isinstance(v, ResultSequence)}
    document: dict[str, Any] = {
        "flowproof_trace": FORMAT_VERSION,  # a document written now is of this version
        "flow": trace.flow,
        "mocks": sorted_keys(singles),
    }
    if sequences:  # absent without `results:`, so older traces stay byte-identical
        document["mock_results"] = sorted_keys({k: list(v) for k, v in sequences.items()})
    if trace.conversation is not None:  # absent in a one-turn flow
        document["conversation"] = conversation_to_document(trace.conversation)
    if trace.faults:  # absent without faults, so older traces stay byte-identical
        document["faults"] = faults_to_document(trace.faults)
    document["turns"] = turns
    if trace.match:  # absent without rules, so older traces stay byte-identical
        document["match"] = [sorted_keys(rule) for rule in trace.match]
    if trace.egress_blocked:
        document["egress"] = {"blocked": [_blocked_entry(item) for item in trace.egress_blocked]}
    if trace.mcp:  # absent without MCP servers, so older traces stay byte-identical
        document["mcp"] = {name: lane_to_document(trace.mcp[name]) for name in sorted(trace.mcp)}
    document[END_KEY] = True  # last: a trace cut short anywhere lacks it
    return document


def from_document(document: Any, source: str, lines: Lines | None = None) -> Trace:
    """Rebuild a Trace, naming what is wrong (at its line, when `lines` says where) when the
    document is not one. Every recorded turn is read by its dialect here, so a trace that
    loads is one that show, diff, the judge and the replay can all read."""
    where = _Where(source, lines or Lines())
    if not isinstance(document, dict) or "flowproof_trace" not in document:
        raise TraceError(f"{source}: not a flowproof trace (no 'flowproof_trace' version key)")
    version = document["flowproof_trace"]
    if type(version) is not int:  # `true` and `1.0` equal 1 in Python, and are no version
        raise trace_error(
            where.key("flowproof_trace"),
            f"`flowproof_trace` is {version!r}, not a format version number (this flowproof "
            f"reads versions {_versions()})",
        )
    if version not in READ_VERSIONS:
        raise TraceError(
            f"{source}: trace format version {version!r} is not supported "
            f"by this flowproof (it reads versions {_versions()}). Fix: re-record it with "
            "`flowproof record <spec>`, or read it with the flowproof that wrote it"
        )
    if version >= 2 and document.get(END_KEY) is not True:
        raise trace_error(
            where.at(where.lines.last) if END_KEY not in document else where.key(END_KEY),
            "the trace does not end with `end_of_trace: true`, so it was cut short (every "
            "trace flowproof writes ends with that line)"
            if END_KEY not in document
            else f"`{END_KEY}` is {document[END_KEY]!r}; flowproof writes `{END_KEY}: true`",
        )
    flow = document.get("flow")
    if not isinstance(flow, str):
        problem = "has no `flow`" if flow is None else f"`flow` is a {type(flow).__name__}"
        raise trace_error(where.key("flow"), f"{problem}; it is the name of the recorded flow")
    return Trace(
        flow=flow,
        turns=_turns(document.get("turns"), where),
        mocks=_mocks(document, where),
        version=version,
        egress_blocked=_egress_blocked(document.get("egress"), where),
        mcp=_mcp_lanes(document.get("mcp"), where),
        match=_match_rules(document.get("match"), where),
        conversation=_conversation(document.get("conversation"), where),
        faults=_faults(document.get("faults"), where),
    )


def _faults(section: Any, where: _Where) -> tuple[Fault, ...]:
    if section is None:
        return ()
    faults = faults_from_document(section)
    if isinstance(faults, str):
        raise trace_error(where.key("faults"), f"its `faults` cannot be read: {faults}")
    return faults


def _conversation(section: Any, where: _Where) -> RecordedConversation | None:
    if section is None:
        return None
    try:
        return conversation_from_document(section, where.key("conversation"))
    except TraceError as exc:
        raise TraceError(f"{exc}. {FIX}") from None


def _versions() -> str:
    return " and ".join(map(str, READ_VERSIONS))


def _turns(section: Any, where: _Where) -> list[Turn]:
    if section is None:
        return []
    if not isinstance(section, list):
        raise trace_error(
            where.key("turns"),
            f"`turns` must be a list of recorded turns, got {type(section).__name__}",
        )
    return [_turn(entry, number, where) for number, entry in enumerate(section, start=1)]


def _turn(entry: Any, number: int, where: _Where) -> Turn:
    """One recorded turn, every field of the type the replay relies on, read by its dialect."""
    at = where.turn(number)
    if not isinstance(entry, dict):
        raise trace_error(
            at,
            f"turn {number} is malformed: it is a {type(entry).__name__}, "
            "not a mapping with `request` and `response`",
        )
    protocol = entry.get("protocol", DEFAULT_PROTOCOL)
    try:
        dialect = dialect_named(protocol) if isinstance(protocol, str) else None
    except KeyError as exc:
        raise trace_error(at, f"turn {number} is malformed: {exc.args[0]}") from None
    if dialect is None:
        raise trace_error(at, f"turn {number} is malformed: its protocol is {protocol!r}, not text")
    try:
        request, status, body = _turn_parts(entry)
    except ValueError as exc:
        raise trace_error(at, f"turn {number} is malformed: {exc}") from None
    agent = entry.get("agent")
    if agent is not None and not isinstance(agent, str):
        raise trace_error(
            at,
            f"turn {number} is malformed: its `agent` is {agent!r}, not text (the "
            "`product/version` its User-Agent named, such as claude-cli/2.1.332)",
        )
    transport = entry.get("transport")
    if transport is not None and transport not in TRANSPORTS:
        raise trace_error(
            at,
            f"turn {number} is malformed: its `transport` is {transport!r}; flowproof writes "
            f"`transport: {WEBSOCKET}` for a turn asked over a WebSocket, and nothing over HTTP",
        )
    conversation_turn = entry.get("conversation_turn")
    if conversation_turn is not None and (
        type(conversation_turn) is not int or conversation_turn < 0
    ):
        raise trace_error(
            at,
            f"turn {number} is malformed: its `conversation_turn` is {conversation_turn!r}, "
            "not the number of a conversation turn (0 before the first message, then 1, 2, ...)",
        )
    fault = entry.get("fault")
    if fault is not None and not isinstance(fault, str):
        raise trace_error(
            at, f"turn {number} is malformed: its `fault` is {fault!r}, not the fault's label"
        )
    try:
        _read_by_dialect(dialect, request, status, body, number)
    except Exception as exc:  # a hand edit can break the dialect anywhere
        raise trace_error(
            at,
            f"turn {number} is malformed: the {protocol} dialect cannot read its request or "
            f"response ({type(exc).__name__}: {exc})",
        ) from None
    return Turn(protocol, request, status, body, agent, transport, conversation_turn, fault)


def _read_by_dialect(
    dialect: Dialect, request: dict[str, Any], status: int, body: Any, number: int
) -> None:
    """Read the turn as the judge (the trajectory) and a divergence report will: what they
    would trip on is found now, at the turn's line, instead of mid-run."""
    dialect.outline(request)  # the conversation, walked as the trajectory walks it
    if status != 200 or not isinstance(body, dict):
        return
    # Without the conversation, which the outline just read: the trajectory would also
    # serialize it whole (its size), a fifth of the load of a big trace.
    thin = {key: value for key, value in request.items() if key != dialect.conversation_key}
    answer = dialect.read_answer(thin, body, number)
    if isinstance(answer, EndpointCall):  # an endpoint's answer: read, no calls in it
        return
    for call in answer.tool_calls:
        if call.call_id is not None and not isinstance(call.call_id, str):
            raise TypeError(f"the id of the tool call {call.name} is {call.call_id!r}, not text")


def _turn_parts(entry: dict[str, Any]) -> tuple[dict[str, Any], int, Any]:
    """A turn's request, status and body; ValueError saying what is wrong with them."""
    request, response = entry.get("request"), entry.get("response")
    if not isinstance(request, dict):
        got = "nothing" if request is None else f"a {type(request).__name__}"
        raise ValueError(f"its `request` must be a mapping (the canonical request), got {got}")
    if not isinstance(response, dict):
        got = "nothing" if response is None else f"a {type(response).__name__}"
        raise ValueError(f"its `response` must be a mapping with `status` and `body`, got {got}")
    status = response.get("status")
    if type(status) is not int or not 100 <= status <= 599:
        raise ValueError(f"its `response.status` must be an HTTP status number, got {status!r}")
    if status < 200:  # an agent given one would wait for the answer that follows it
        raise ValueError(
            f"its `response.status` is {status}, an interim (1xx) status, not an answer: a "
            "recorded turn holds the final answer (200 to 599)"
        )
    if "body" not in response:
        raise ValueError("its `response` has no `body`")
    return request, status, response["body"]


def _mocks(document: dict[str, Any], where: _Where) -> dict[str, Any]:
    """The mocks snapshot: single results, and `mock_results` sequences as ResultSequence."""
    mocks = document.get("mocks")
    if mocks is None:
        mocks = {}
    if not isinstance(mocks, dict):
        raise trace_error(
            where.key("mocks"),
            f"`mocks` must be a mapping of tool name to result, got {type(mocks).__name__}",
        )
    mocks = dict(mocks)
    sequences = document.get("mock_results")
    if sequences is None:
        return mocks
    if not isinstance(sequences, dict) or not all(
        isinstance(values, list) for values in sequences.values()
    ):
        raise trace_error(
            where.key("mock_results"),
            "the mock_results section is malformed (expected tool: [...])",
        )
    mocks.update({str(name): ResultSequence(values) for name, values in sequences.items()})
    return mocks


def _match_rules(section: Any, where: _Where) -> list[dict[str, Any]]:
    if section is None:
        return []
    if not isinstance(section, list) or not all(isinstance(rule, dict) for rule in section):
        raise trace_error(
            where.key("match"), "the match section is malformed (expected a list of rules)"
        )
    return [dict(rule) for rule in section]


def _mcp_lanes(section: Any, where: _Where) -> dict[str, Lane]:
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise trace_error(
            where.key("mcp"), "the mcp section is malformed (expected server name: lane)"
        )
    lanes = {}
    for name, lane in section.items():
        at = where.server(str(name))
        try:
            lanes[str(name)] = lane_from_document(lane, f"{at}: the MCP lane '{name}'")
        except TraceError as exc:
            raise TraceError(f"{exc}. {FIX}") from None
    return lanes


def _egress_blocked(section: Any, where: _Where) -> list[dict[str, Any]]:
    if section is None:
        return []
    blocked = section.get("blocked") if isinstance(section, dict) else None
    at = where.key("egress")
    if not isinstance(blocked, list):
        raise trace_error(at, "the egress section is malformed (expected `blocked: [...]`)")
    items = []
    for number, item in enumerate(blocked, start=1):
        try:
            items.append(_blocked_entry(item))
        except (KeyError, TypeError, ValueError) as exc:
            raise trace_error(at, f"egress blocked entry {number} is malformed ({exc!r})") from exc
    return items


def _blocked_entry(item: Any) -> dict[str, Any]:
    """One refused destination in its stored shape (raises on a missing or bad field)."""
    return {
        "destination": str(item["destination"]),
        "protocol": str(item["protocol"]),
        "at_ms": int(item["at_ms"]),
    }
