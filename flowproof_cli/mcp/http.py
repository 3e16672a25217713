"""The streamable-HTTP MCP boundary's logic, with mitmproxy left out.

`addons/mcp_http.py` hands each HTTP request on a server's listener to `on_request` and
gets back what to do: a whole `Reply`, a `ForwardRequest` to the real server (record), or a
`StreamReply` to serve over time from the loopback stream server (replay).

Record: every POST, GET and DELETE goes to the real url with the agent's headers
(Authorization and Mcp-Session-Id pass through, neither is stored); answers, JSON or SSE,
go back to the agent as the server sent them while each message is read into the lane. A
mocked `tools/call` is answered here and never forwarded.

Replay: zero network. A call's answer is one JSON body, or SSE when server messages come
before it; it is streamed over time when it must wait (for the agent to answer a
server-initiated request, or for other calls). The session id is a constant. The GET
stream is served by flowproof (a second concurrent one gets 409). DELETE is acknowledged.

Resumption (handshake era only, 2025-03-26 to 2025-11-25): every SSE event flowproof sends
carries the id `<stream>-<n>`, the n-th event (1-based) of that stream, where the stream
is `get` (the standalone GET stream) or `call<N>` (the answer of call N, by lane position):
the same lane and agent give the same ids on every replay. A GET with `Last-Event-ID`
resumes the stream that id names with the events after it, then goes on live; an id
flowproof never sent is a named 400 (the SDK clients give up on it rather than hang). A
message that went to the GET stream because the agent had left its call's stream is not
sent again on the call's resumed stream; the call's answer itself waits for the resume.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowproof_cli.dialects.sse import compact
from flowproof_cli.mcp.canonical import (
    RESUMABLE_VERSIONS,
    Kind,
    batch_refusal,
    error_message,
    kind_of,
    with_id,
)
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.mcp.mocks import (
    MockSchemaError,
    mock_answer,
    mocked_tool,
    output_schemas,
    refusal,
)
from flowproof_cli.mcp.recorder import LaneRecorder
from flowproof_cli.mcp.replayer import Emission, Replayer
from flowproof_cli.mcp.sse import Channel, frame

REPLAY_SESSION_ID = "flowproof-replay"
SESSION_HEADER = "mcp-session-id"
LAST_EVENT_ID_HEADER = "last-event-id"
#: The stream key of the standalone GET stream (a call's answer stream is `call<N>`).
STANDALONE_KEY = "get"
#: The 2026-07-28 headers that must agree with the body, and the param each mirrors.
NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ForwardRequest:
    """Record: send the request on to the real server; read its answer with `via`."""

    url: str
    via: Any = None  # the request id whose answer stream this is (None: no call)
    standalone: bool = False  # the GET stream


@dataclass
class StreamReply:
    channel: Channel


def stream_key(position: int | None) -> str:
    """The stream an event id names: `get`, or `call<N>` for the answer of call N (1-based)."""
    return STANDALONE_KEY if position is None else f"call{position + 1}"


@dataclass
class _Stream:
    """One SSE stream of the replay, kept whole so that an agent can resume it."""

    key: str
    events: list[dict[str, Any]] = field(default_factory=list)  # every message, in order
    channel: Channel | None = None  # the connection carrying it now
    handed: int = 0  # events put on some connection (the GET stream's backlog: the rest)
    finished: bool = False  # a call's answer is in it: nothing more comes

    @property
    def live(self) -> bool:
        return self.channel is not None and not self.channel.closed

    def event_id(self, number: int) -> str:
        return f"{self.key}-{number}"


def _json_reply(status: int, message: Any, headers: Mapping[str, str] | None = None) -> Reply:
    body = compact(message).encode()
    return Reply(status, body, {"content-type": "application/json", **(headers or {})})


def _refusal(status: int, text: str, request_id: Any = None, code: int = -32600) -> Reply:
    return _json_reply(status, error_message(request_id, code, f"flowproof: {text}"))


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


def accepts_sse(headers: Mapping[str, str]) -> bool:
    accept = _header(headers, "accept").lower()
    return "text/event-stream" in accept or "*/*" in accept


class HttpMcpSession:
    """One MCP server behind one listener, for one flow."""

    def __init__(
        self,
        server: str,
        *,
        mode: str,
        url: str | None = None,
        lane: Lane | None = None,
        mocks: Mapping[str, Any] | None = None,
    ):
        self.server = server
        self.mode = mode
        self.url = url
        self.mocks = dict(mocks or {})
        self.requests = 0
        self.errors: list[str] = []
        self.recorder = LaneRecorder()
        self.replayer = Replayer(server, lane or Lane(), self.mocks)
        self._streams: dict[int | None, _Stream] = {None: _Stream(STANDALONE_KEY)}
        self._seen_event_ids: set[str] = set()
        self._negotiated: str | None = None

    @property
    def contacted(self) -> bool:
        return self.requests > 0

    @property
    def recording(self) -> bool:
        return self.mode == "record"

    def lane(self) -> Lane:
        return self.recorder.lane

    # -- requests ------------------------------------------------------------------------

    def on_request(
        self, method: str, headers: Mapping[str, str], body: bytes
    ) -> Reply | ForwardRequest | StreamReply:
        self.requests += 1
        if method == "GET":
            return self._get(headers)
        if method == "DELETE":
            if self.recording:
                return ForwardRequest(self._upstream())
            return Reply(200)
        if method != "POST":
            return Reply(405, b"", {"allow": "GET, POST, DELETE"})
        try:
            message = json.loads(body or b"null")
        except ValueError:
            return _refusal(400, "the body is not JSON", code=-32700)
        if isinstance(message, list):
            return self._batch(message, headers)
        if kind_of(message) is Kind.INVALID:
            return _refusal(400, "the body is not a JSON-RPC message")
        mismatch = self._header_mismatch(message, headers)
        if mismatch is not None:
            return _refusal(400, mismatch, message.get("id"))
        if self.recording:
            return self._record(message, headers)
        return self._replay(message, headers)

    def _upstream(self) -> str:
        if not self.url:
            raise RuntimeError(f"record has no url for the MCP server '{self.server}'")
        return self.url

    @staticmethod
    def _header_mismatch(message: dict[str, Any], headers: Mapping[str, str]) -> str | None:
        """2026-07-28: `Mcp-Method` / `Mcp-Name` must say what the body says."""
        said = _header(headers, "mcp-method")
        if said and "method" in message and said != message["method"]:
            return f"the Mcp-Method header says {said}, the body says {message['method']}"
        name = _header(headers, "mcp-name")
        param = NAME_PARAMS.get(str(message.get("method")))
        params = message.get("params")
        if name and param and isinstance(params, dict) and params.get(param) != name:
            return f"the Mcp-Name header says {name}, the body says {params.get(param)}"
        return None

    def _batch(self, batch: list[Any], headers: Mapping[str, str]) -> Reply | ForwardRequest:
        negotiated = self.recorder.negotiated if self.recording else self.replayer.negotiated
        text = batch_refusal(negotiated)
        if text is not None:
            self.errors.append(f"the MCP server '{self.server}': {text}")
            return _refusal(400, text)
        if self.recording:
            if any(isinstance(m, dict) and mocked_tool(m, self.mocks) for m in batch):
                text = "a mocked tool cannot be called inside a JSON-RPC batch"
                self.errors.append(f"the MCP server '{self.server}': {text}")
                return _refusal(400, text)
            for element in batch:
                self.recorder.client(element)
            return ForwardRequest(self._upstream())
        finals: list[dict[str, Any]] = []
        for element in batch:
            here = None
            emissions = self.replayer.receive(element)
            if kind_of(element) is Kind.REQUEST:
                here = self.replayer.last_position
            finals.extend(e.message for e in self._route(emissions, here) if e.final)
        return _json_reply(200, finals) if finals else Reply(202)

    # -- record --------------------------------------------------------------------------

    def _record(
        self, message: dict[str, Any], headers: Mapping[str, str]
    ) -> Reply | ForwardRequest:
        if mocked_tool(message, self.mocks) is not None:  # the tools/list scan only for a mock
            lists = (c.result for c in self.recorder.lane.calls if c.method == "tools/list")
            try:
                answer = mock_answer(message, self.mocks, output_schemas(lists))
            except MockSchemaError as exc:  # the flow fails; the agent gets an error
                text, answer = refusal(self.server, exc)
                self.errors.append(text)
            assert answer is not None
            self.recorder.client(message, mocked=True)
            reply = with_id(message["id"], answer)
            self.recorder.server(reply)
            return self._answer_reply([], reply, headers)
        self.recorder.client(message)
        via = message["id"] if kind_of(message) is Kind.REQUEST else None
        return ForwardRequest(self._upstream(), via=via)

    def on_upstream_message(
        self,
        message: Any,
        *,
        via: Any = None,
        standalone: bool = False,
        status: int | None = None,
        event_id: str | None = None,
    ) -> None:
        """A message the real server sent (a JSON answer, or one SSE event)."""
        if event_id:
            if event_id in self._seen_event_ids:
                return  # replayed to a resuming agent: already in the lane
            self._seen_event_ids.add(event_id)
        for element in message if isinstance(message, list) else [message]:
            received = element
            if (
                via is not None
                and not isinstance(message, list)
                and kind_of(element) is Kind.RESPONSE
                and element.get("id") is None
            ):
                # A request rejected before its id was read (`"id": null`): it answers `via`.
                received = {**element, "id": via}
            self.recorder.server(received, via=via, stream=standalone, status=status)

    def on_upstream_failure(self, via: Any, status: int, text: str) -> None:
        """A request answered with an HTTP error and no JSON-RPC body: keep it as an error."""
        if via is None:
            return
        error = {"code": -32603, "message": f"HTTP {status}: {text[:200]}"}
        self.recorder.server({"jsonrpc": "2.0", "id": via, "error": error}, status=status)

    def on_upstream_unreachable(self, reason: str) -> None:
        self.errors.append(
            f"flowproof could not reach the real MCP server '{self.server}' at {self.url}: {reason}"
        )

    # -- replay --------------------------------------------------------------------------

    @property
    def resumable(self) -> bool:
        """The replayed session negotiated a handshake-era version: events carry ids."""
        if self._negotiated is None:  # known once initialize was answered: kept from then
            self._negotiated = self.replayer.negotiated
        return self._negotiated in RESUMABLE_VERSIONS

    def _get(self, headers: Mapping[str, str]) -> Reply | ForwardRequest | StreamReply:
        if self.recording:
            return ForwardRequest(self._upstream(), standalone=True)
        last = _header(headers, LAST_EVENT_ID_HEADER).strip()
        if last and self.resumable:
            return self._resume(last)
        standalone = self._streams[None]
        if standalone.live:
            return _refusal(409, "the standalone stream is already open")
        return self._connect(standalone, standalone.handed)

    def _resume(self, last: str) -> Reply | StreamReply:
        """`Last-Event-ID`: the events of that id's stream after it, then the stream live."""
        key, _, number = last.rpartition("-")
        stream = next((s for s in self._streams.values() if s.key == key), None)
        sent = int(number) if number.isascii() and number.isdigit() else 0
        if stream is None or not 1 <= sent <= len(stream.events) or stream.event_id(sent) != last:
            return _refusal(
                400, f"Last-Event-ID {last!r} names no event this replay sent; open a new stream"
            )
        if stream.channel is not None:
            stream.channel.close()  # the connection the agent lost, if flowproof still has it
        if stream.finished:
            body = b"".join(self._frame(stream, n) for n in range(sent, len(stream.events)))
            return Reply(200, body, {"content-type": "text/event-stream"})
        return self._connect(stream, sent)

    def _connect(self, stream: _Stream, start: int, channel: Channel | None = None) -> StreamReply:
        """A new connection for `stream`, starting with its events from `start` (0-based)."""
        channel = channel if channel is not None else Channel()
        for number in range(start, len(stream.events)):
            channel.put(self._frame(stream, number))
        stream.channel = channel
        stream.handed = len(stream.events)
        return StreamReply(channel)

    def _frame(self, stream: _Stream, index: int) -> bytes:
        event_id = stream.event_id(index + 1) if self.resumable else None
        return frame(stream.events[index], event_id)

    def _send(self, stream: _Stream, message: dict[str, Any]) -> None:
        """Append to the stream, and write it to the stream's connection when it has one."""
        stream.events.append(message)
        if stream.live and stream.channel is not None:
            stream.channel.put(self._frame(stream, len(stream.events) - 1))
            stream.handed = len(stream.events)

    def _call_stream(self, position: int) -> _Stream:
        stream = _Stream(stream_key(position))
        self._streams[position] = stream
        return stream

    def _replay(self, message: dict[str, Any], headers: Mapping[str, str]) -> Reply | StreamReply:
        emissions = self.replayer.receive(message)
        if kind_of(message) is not Kind.REQUEST:
            self._route(emissions, None)
            return Reply(202)
        here = self.replayer.last_position
        mine = self._route(emissions, here)
        final = next((e for e in mine if e.final), None)
        extra = {SESSION_HEADER: REPLAY_SESSION_ID} if message.get("method") == "initialize" else {}
        if final is not None:
            before = [e.message for e in mine if not e.final]
            return self._answer_reply(
                before, final.message, headers, final.status, extra, position=here
            )
        assert here is not None and here >= 0  # only a positioned call's answer can wait
        stream = self._call_stream(here)
        reply = self._connect(stream, 0, Channel(headers=extra))
        for emission in mine:
            self._send(stream, emission.message)
        return reply

    def _answer_reply(
        self,
        before: list[dict[str, Any]],
        answer: dict[str, Any],
        headers: Mapping[str, str],
        status: int | None = None,
        extra: Mapping[str, str] | None = None,
        *,
        position: int | None = None,
    ) -> Reply:
        if before and accepts_sse(headers):
            if position is None or position < 0:
                body = b"".join(frame(message) for message in [*before, answer])
            else:  # kept whole: a resuming agent gets what it missed of it
                stream = self._call_stream(position)
                stream.events = [*before, answer]
                stream.handed, stream.finished = len(stream.events), True
                body = b"".join(self._frame(stream, n) for n in range(len(stream.events)))
            return Reply(200, body, {"content-type": "text/event-stream", **(extra or {})})
        return _json_reply(status or 200, answer, extra)

    def _route(self, emissions: list[Emission], here: int | None) -> list[Emission]:
        """Emissions for the request at hand come back; the others go to their streams."""
        mine: list[Emission] = []
        for emission in emissions:
            if emission.channel is not None and emission.channel == here:
                mine.append(emission)
                continue
            stream = self._streams.get(emission.channel) if emission.channel is not None else None
            if stream is not None and not stream.finished:
                if stream.live:
                    self._send(stream, emission.message)
                    if emission.final:
                        self._finish(stream)
                    continue
                if emission.final:
                    # The agent left that answer's stream: the answer waits for it to resume
                    # (handshake era); nobody is told otherwise.
                    if self.resumable:
                        self._send(stream, emission.message)
                        self._finish(stream)
                    continue
            elif emission.final:
                continue  # the agent left that answer's stream: nobody to tell
            # Not resent on the call's stream if the agent resumes it: delivered here.
            self._send(self._streams[None], emission.message)
        return mine

    @staticmethod
    def _finish(stream: _Stream) -> None:
        stream.finished = True
        if stream.channel is not None:
            stream.channel.close()

    def close(self) -> None:
        for stream in self._streams.values():
            if stream.channel is not None:
                stream.channel.close()
