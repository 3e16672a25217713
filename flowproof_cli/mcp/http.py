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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowproof_cli.mcp.canonical import (
    BATCH_PROTOCOL_VERSION,
    Kind,
    error_message,
    kind_of,
)
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.mcp.mocks import mock_answer, mocked_tool, output_schemas
from flowproof_cli.mcp.recorder import LaneRecorder
from flowproof_cli.mcp.replayer import Emission, Replayer
from flowproof_cli.mcp.sse import Channel, frame

REPLAY_SESSION_ID = "flowproof-replay"
SESSION_HEADER = "mcp-session-id"
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


def _json_reply(status: int, message: Any, headers: Mapping[str, str] | None = None) -> Reply:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
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
        self._streams: dict[int | None, Channel] = {}
        self._standalone_backlog: list[dict[str, Any]] = []
        self._seen_event_ids: set[str] = set()

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
        if negotiated != BATCH_PROTOCOL_VERSION:
            text = (
                "a JSON-RPC batch is only allowed in protocol 2025-03-26 (this session "
                f"negotiated {negotiated or 'none'})"
            )
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
        lists = (c.result for c in self.recorder.lane.calls if c.method == "tools/list")
        answer = mock_answer(message, self.mocks, output_schemas(lists))
        if answer is not None:
            self.recorder.client(message, mocked=True)
            reply = {"jsonrpc": "2.0", "id": message["id"], **answer}
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

    def _get(self, headers: Mapping[str, str]) -> Reply | ForwardRequest | StreamReply:
        if self.recording:
            return ForwardRequest(self._upstream(), standalone=True)
        current = self._streams.get(None)
        if current is not None and not current.closed:
            return _refusal(409, "the standalone stream is already open")
        channel = Channel()
        for message in self._standalone_backlog:
            channel.put(frame(message))
        self._standalone_backlog.clear()
        self._streams[None] = channel
        return StreamReply(channel)

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
            return self._answer_reply(before, final.message, headers, final.status, extra)
        channel = Channel(headers=extra)
        for emission in mine:
            channel.put(frame(emission.message))
        self._streams[here] = channel
        return StreamReply(channel)

    @staticmethod
    def _answer_reply(
        before: list[dict[str, Any]],
        answer: dict[str, Any],
        headers: Mapping[str, str],
        status: int | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> Reply:
        if before and accepts_sse(headers):
            body = b"".join(frame(message) for message in [*before, answer])
            return Reply(200, body, {"content-type": "text/event-stream", **(extra or {})})
        return _json_reply(status or 200, answer, extra)

    def _route(self, emissions: list[Emission], here: int | None) -> list[Emission]:
        """Emissions for the request at hand come back; the others go to their streams."""
        mine: list[Emission] = []
        for emission in emissions:
            if emission.channel is not None and emission.channel == here:
                mine.append(emission)
                continue
            channel = self._streams.get(emission.channel)
            if channel is not None and not channel.closed:
                channel.put(frame(emission.message))
                if emission.final:
                    channel.close()
                    del self._streams[emission.channel]
                continue
            if emission.final:
                continue  # the agent left that answer's stream: nobody to tell
            standalone = self._streams.get(None)
            if standalone is not None and not standalone.closed:
                standalone.put(frame(emission.message))
            else:
                self._standalone_backlog.append(emission.message)
        return mine

    def close(self) -> None:
        for channel in self._streams.values():
            channel.close()
        self._streams.clear()
