"""The model boundary's WebSocket transport: the Responses API over `ws(s)://.../responses`.

Codex CLI dials the Responses API over a WebSocket by default, and falls back to HTTP only
when the upgrade is answered 426. Each `response.create` frame is a request body
(flowproof_cli/dialects/websocket.py), so the session answers it as it answers an HTTP
request: matched strictly, recorded and rendered the same way; only the framing differs.

- Replay: flowproof answers the upgrade itself (101) when the trace holds a turn recorded
  over a WebSocket; each client frame is dropped (there is no server behind it) and
  answered with the events of its recorded turn, injected as server frames. A trace
  recorded over HTTP gets the upgrade answered 426, so the client falls back to HTTP as it
  did when recorded.
- Record: the upgrade goes to the fixed upstream with the record key, as an HTTP request
  does; each client frame is read (mocks applied, the match rules counted) and passed on;
  the upstream's events for it are held back until its response completes, then the turn
  is kept and the client gets the events synthesized from it, the same ones replay sends.
  An `error` or `response.failed` event fails the record and reaches the client as the
  upstream sent it.
- An upgrade on a route whose dialect has no WebSocket form (`Dialect.websocket`) is
  answered 426 with a JSON body saying so, and the run's notes say it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import wsproto
import wsproto.events
import wsproto.utilities
from mitmproxy import http
from mitmproxy.net.http.status_codes import RESPONSES

from flowproof_addons import deadline
from flowproof_addons.connections import cancel_client_reader
from flowproof_addons.credentials import drop_agent_credentials
from flowproof_addons.guard import mark_forwarded
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.cassette.session import recorded_over, upgrade_target
from flowproof_cli.cassette.upstream import Upstream, timeout_reason
from flowproof_cli.dialects import Dialect, Rendered
from flowproof_cli.dialects.base import TRANSPORT_FIELDS
from flowproof_cli.dialects.websocket import (
    COMPLETED,
    FAILED,
    WEBSOCKET,
    Unreadable,
    accept_key,
    error_frame,
    event_type,
    failure_of,
    frame_of_request,
    frames_of,
    request_of_frame,
)
from flowproof_cli.mode import Mode
from flowproof_cli.quoting import printable

#: `flow.metadata` keys: the agent's path of an upgraded flow (record rewrites the
#: request's), the record upgrade awaiting the upstream's answer, and the frames waiting.
PATH = "flowproof_ws_path"
UPGRADING = "flowproof_ws_upgrading"
WAITING = "flowproof_ws_waiting"
SINK = "flowproof_ws_sink"
#: The WebSocket version flowproof speaks (RFC 6455); another is answered 426 naming it.
VERSION = "13"
_UPGRADE_REQUIRED = 426


@dataclass
class _Waiting:
    """A forwarded frame's turn, and the upstream's frames for it held back so far."""

    pending: Any  # cassette.forward.PendingTurn
    frames: list[bytes] = field(default_factory=list)


def _clean(path: str) -> str:
    return printable(path.split("?", 1)[0])


def _respond(
    flow: http.HTTPFlow, status: int, fields: list[tuple[bytes, bytes]], body: bytes
) -> None:
    now = time.time()
    reason = RESPONSES.get(status, "").encode()
    flow.response = http.Response(
        b"HTTP/1.1", status, reason, http.Headers(fields), body, None, now, now
    )


def refuse_upgrade(
    flow: http.HTTPFlow, session: CassetteSession, dialect: Dialect, why: str
) -> None:
    """426: the client speaks HTTP on this route instead; the run's notes say why."""
    path = _clean(flow.request.path)
    note = f"the agent's WebSocket upgrade of {path} was answered 426, so it used HTTP: {why}"
    session.notes.append(note)
    body = json.dumps(
        dialect.error_body(f"flowproof: {note}", "websocket_not_served", _UPGRADE_REQUIRED)
    ).encode()
    fields = [
        (b"content-type", b"application/json"),
        (b"sec-websocket-version", VERSION.encode()),
        (b"x-should-retry", b"false"),
        (b"content-length", str(len(body)).encode()),
    ]
    _respond(flow, _UPGRADE_REQUIRED, fields, body)
    flow.comment = "flowproof: WebSocket refused (426), HTTP expected"


def on_upgrade(flow: http.HTTPFlow, session: CassetteSession, dialect: Dialect) -> None:
    """Answer a WebSocket upgrade on a model route, or (record) send it to the upstream."""
    request = flow.request
    flow.metadata[PATH] = request.path
    session.headers.append(request.headers.fields)  # for the secret-leak scan, as sent
    if not dialect.websocket:
        refuse_upgrade(
            flow, session, dialect, f"flowproof serves the {dialect.name} API over HTTP only"
        )
        return
    version = request.headers.get("sec-websocket-version", "").strip()
    if version != VERSION:
        why = f"it asked for WebSocket version {printable(version)!r}; flowproof speaks {VERSION}"
        refuse_upgrade(flow, session, dialect, why)
        return
    if session.mode is Mode.REPLAY:
        if not recorded_over(session, WEBSOCKET):
            why = "the trace was recorded over HTTP, so replay answers the way record did"
            refuse_upgrade(flow, session, dialect, why)
            return
        flow.comment = "flowproof: WebSocket answered from the trace"
        flow.metadata[SINK] = True  # the caller sends it to the loopback `Sink`
        return
    target = upgrade_target(session, request.path, dialect)
    if isinstance(target, Rendered):
        fields = [(b"content-type", target.content_type.encode()), (b"x-should-retry", b"false")]
        _respond(flow, target.status, fields, target.body)
        return
    url, auth = target
    drop_agent_credentials(request.headers)
    request.url = url
    request.host_header = urlsplit(url).netloc
    for name, value in auth.items():
        request.headers[name] = value
    flow.metadata[UPGRADING] = True
    mark_forwarded(flow)
    upstream = _responses_upstream(session)
    if upstream is not None:  # an upstream that never answers the upgrade fails it
        deadline.arm(flow, upstream.timeout_s)


def _responses_upstream(session: CassetteSession) -> Upstream | None:
    """Record: the upstream the socket goes to (the Responses API's provider's)."""
    return session.upstream.for_provider("openai") if session.upstream is not None else None


def on_upgrade_answered(flow: http.HTTPFlow, session: CassetteSession) -> None:
    """Record: the upstream's answer to a forwarded upgrade. 101 opens the socket; 426
    sends the client to HTTP (noted); any other answer reaches the agent as sent and fails
    the record, as an HTTP error answer does."""
    flow.metadata.pop(UPGRADING, None)
    deadline.disarm(flow)
    response = flow.response
    if response is None or response.status_code == 101:
        return
    path = _clean(flow.metadata.get(PATH, flow.request.path))
    status = response.status_code
    if status == _UPGRADE_REQUIRED:  # a note, not a failure: the agent asks again over HTTP
        note = f"the upstream answered the agent's WebSocket upgrade of {path} with 426, so "
        session.notes.append(note + "the agent used HTTP")
        return
    raw = response.get_content(strict=False) or b""
    upstream = _responses_upstream(session)
    if upstream is not None:
        raw = upstream.without_key(raw)
        response.content = raw
    shown = printable(raw.decode("utf-8", "replace"))[:300] or "(empty body)"
    session.errors.append(
        f"flowproof: the upstream model refused the WebSocket upgrade of {path} with HTTP "
        f"{status}: {shown}"
    )


def on_upgrade_failed(flow: http.HTTPFlow, session: CassetteSession, reason: str) -> None:
    """Record: the upstream could not be reached for the upgrade."""
    flow.metadata.pop(UPGRADING, None)
    session.errors.append(f"flowproof: could not reach the upstream model: {reason}")


class Sink:
    """Replay: the loopback WebSocket peer of a socket answered from the trace.

    mitmproxy relays a WebSocket between two peers, and sends the client's pings and its
    close on to the server side; with no server there it fails the connection. So replay
    opens the socket to this inert peer on 127.0.0.1 (as the MCP replay's loopback stream
    server, mcp/sse.py): it accepts the upgrade, answers pings and the close, and never
    sees a request (each client frame is dropped and answered by `Frames`)."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._lock = asyncio.Lock()
        self.port = 0

    async def ensure_started(self) -> int:
        async with self._lock:
            if self._server is None:
                self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
                self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def close(self) -> None:
        """Stop listening (the proxy is done; its sockets close with it)."""
        if self._server is not None:
            self._server.close()
            self._server = None

    @staticmethod
    async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            key = next(
                (
                    line.split(b":", 1)[1].strip().decode("latin-1")
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"sec-websocket-key:")
                ),
                "",
            )
            writer.write(
                b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n"
                b"connection: Upgrade\r\nsec-websocket-accept: "
                + accept_key(key).encode()
                + b"\r\n\r\n"
            )
            await writer.drain()
            peer = wsproto.Connection(wsproto.ConnectionType.SERVER)
            while data := await reader.read(65536):
                peer.receive_data(data)
                for event in peer.events():
                    if isinstance(event, wsproto.events.Ping):
                        writer.write(peer.send(event.response()))
                    elif isinstance(event, wsproto.events.CloseConnection):
                        writer.write(peer.send(event.response()))
                        await writer.drain()
                        return
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
            pass
        except wsproto.utilities.LocalProtocolError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def to_sink(flow: http.HTTPFlow, sink: Sink) -> None:
    """Replay: the upgrade goes to the loopback `Sink` (never anywhere else)."""
    port = await sink.ensure_started()
    request = flow.request
    drop_agent_credentials(request.headers)
    request.url = f"http://127.0.0.1:{port}/"
    request.host_header = f"127.0.0.1:{port}"
    mark_forwarded(flow)


def drop_client(proxyserver: Any, flow: http.HTTPFlow) -> None:
    """End the agent's socket without a close frame, as a reset does. Killing a WebSocket
    flow only marks it (mitmproxy's WebSocket layer reads a message's `dropped`, never the
    flow's `killed`), so the task reading the agent's connection is cancelled: mitmproxy
    then closes it as when a client goes."""
    connections = getattr(proxyserver, "connections", {})
    handler = connections.get(flow.client_conn.id)
    if handler is not None:
        cancel_client_reader(handler)


class Frames:
    """One session's frames: read the client's, hold the upstream's, send the answers."""

    def __init__(self, proxyserver: Any) -> None:
        #: `Proxyserver`: its `inject_websocket` sends a frame on a live socket, and its
        #: connections are where a reset ends one.
        self._proxyserver = proxyserver
        self._inject = proxyserver.inject_websocket

    def send(self, flow: http.HTTPFlow, frames: list[bytes]) -> None:
        for frame in frames:
            self._inject(flow, True, frame, True)

    async def from_client(
        self, flow: http.HTTPFlow, session: CassetteSession, dialect: Dialect
    ) -> None:
        assert flow.websocket is not None
        message = flow.websocket.messages[-1]
        path = flow.metadata.get(PATH, flow.request.path)
        body = request_of_frame(message.content)
        if isinstance(body, Unreadable):
            message.drop()
            text = (
                f"flowproof: the agent's WebSocket frame on {_clean(path)} is not a Responses "
                f"request: {body.reason}; it was refused"
            )
            self.send(flow, frames_of(session.on_refused(path, dialect, 400, text)))
            return
        raw = json.dumps(body, ensure_ascii=False).encode()
        agent = flow.request.headers.get("user-agent")
        outcome = (
            await session.off_loop.on_request(
                path, raw, dialect, user_agent=agent, transport=WEBSOCKET
            )
            if session.off_loop is not None
            else session.on_request(path, raw, dialect, user_agent=agent, transport=WEBSOCKET)
        )
        if isinstance(outcome, Rendered):
            message.drop()
            if outcome.reset:  # a fault: the socket closed without an answer
                flow.kill()
                drop_client(self._proxyserver, flow)
                return
            if outcome.delay_s > 0:  # a fault: the answer late (the other flows go on)
                await asyncio.sleep(outcome.delay_s)
            self.send(flow, frames_of(outcome))
            return
        pending = replace(outcome.pending, transport=WEBSOCKET)
        flow.metadata.setdefault(WAITING, deque()).append(_Waiting(pending))
        deadline.rearm(flow, outcome.timeout_s)  # the upstream's silence is bounded as over HTTP
        sent = json.loads(message.content)  # the client's own transport fields go on as sent
        kept = {name: sent[name] for name in TRANSPORT_FIELDS if name in sent}
        message.content = frame_of_request({**json.loads(outcome.body), **kept})

    def from_upstream(self, flow: http.HTTPFlow, session: CassetteSession) -> None:
        """Record: an upstream event. Held back until its response ends; then the client
        gets the turn's synthesized events, or (a failure) the upstream's own frames."""
        assert flow.websocket is not None
        message = flow.websocket.messages[-1]
        upstream = _responses_upstream(session)
        content = upstream.without_key(message.content) if upstream else b""
        waiting: deque[_Waiting] = flow.metadata.get(WAITING) or deque()
        kind, event = event_type(content)
        if not waiting:  # not for a request (an error before any): passed on as sent
            message.content = content
            if kind in FAILED and event is not None:
                status, body = failure_of(event)
                session.errors.append(
                    f"flowproof: the upstream model sent an {kind} event on the WebSocket "
                    f"with no request pending (HTTP {status}): {printable(body.decode())[:300]}"
                )
            return
        message.drop()
        current = waiting[0]
        current.frames.append(content)
        timeout = upstream.timeout_s if upstream else None
        if event is None or kind not in (*COMPLETED, *FAILED):
            if timeout is not None:
                deadline.rearm(flow, timeout)  # each event starts the wait over
            return
        waiting.popleft()
        if waiting and timeout is not None:
            deadline.rearm(flow, timeout)
        elif not waiting:
            deadline.disarm(flow)
        if kind in COMPLETED:
            answer = json.dumps(event.get("response"), ensure_ascii=False).encode()
            rendered = session.on_upstream_response(current.pending, 200, answer)
            if rendered.status == 200:
                self.send(flow, frames_of(rendered))
                return
        else:
            status, body = failure_of(event)
            session.on_upstream_response(current.pending, status, body)
        self.send(flow, current.frames)  # a failure reaches the agent as the upstream sent it

    @staticmethod
    def ended(flow: http.HTTPFlow, session: CassetteSession) -> None:
        """The socket closed: a response still awaited fails the record."""
        waiting: deque[_Waiting] = flow.metadata.pop(WAITING, None) or deque()
        waited = deadline.disarm(flow)
        websocket = flow.websocket
        by = "the agent" if websocket is not None and websocket.closed_by_client else "the upstream"
        reason = (
            timeout_reason(waited)
            if waited is not None
            else f"{by} closed the WebSocket before the response completed"
        )
        for item in waiting:
            session.on_upstream_error(item.pending, reason, timed_out=waited is not None)


__all__ = [
    "PATH",
    "Frames",
    "error_frame",
    "on_upgrade",
    "on_upgrade_answered",
    "on_upgrade_failed",
    "refuse_upgrade",
]
