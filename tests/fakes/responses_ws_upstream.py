"""The fake model upstream, also speaking the OpenAI Responses API over WebSocket.

Everything `FakeUpstream` answers over HTTP it still answers; in addition a `GET` of
``.../responses`` asking to upgrade to WebSocket is accepted (101), after which every text
frame the client sends is a ``response.create`` event (the Responses request body with
``"type": "response.create"``) and is answered with the same events the HTTP stream sends,
one JSON text frame each, ending in ``response.completed``. What the real service does
and this fake checks, so a record that passes proves flowproof forwarded the WebSocket as
such (not as HTTP):

* ``generate: false`` warms the connection up: the response is created and completed with
  no output, and a later ``response.create`` may continue from it;
* ``previous_response_id`` names a response of THIS connection when ``store`` is false
  (connection-local state); any other id is answered with an ``error`` event whose code is
  ``previous_response_not_found`` (HTTP ``/responses`` keeps none of this state);
* with ``api_key`` set, the upgrade must carry ``Authorization: Bearer <api_key>`` (else
  401, as the service refuses a wrong key before upgrading).

A ``Reply`` whose status is not 200 is sent as the service sends a failed request on the
socket: an ``error`` event carrying that ``status`` and the error body.

Importable::

    with ResponsesWebSocketUpstream(seed=1) as fake:
        fake.base_url, fake.upgrades, fake.requests   # requests: method "WEBSOCKET" per frame
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import socketserver
import sys
from typing import Any

from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    TextMessage,
)

from tests.fakes.fake_upstream import (
    DIALECT_RESPONSES,
    FakeUpstream,
    Headers,
    RecordedRequest,
    Renderer,
    Reply,
    Script,
    _Handler,
    _Server,
    error_body,
)

#: The GUID every WebSocket accept key is derived with (RFC 6455).
_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#: The method a client frame is recorded under in `requests`.
WEBSOCKET = "WEBSOCKET"


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + _WS_GUID).digest()).decode()


def sse_payloads(raw: bytes) -> list[dict[str, Any]]:
    """The JSON `data:` payloads of an SSE stream, in order."""
    payloads = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            payloads.append(json.loads(line[len("data: ") :]))
    return payloads


class _Socket:
    """One accepted WebSocket: frames in, events out, connection-local responses."""

    def __init__(self, handler: _WsHandler) -> None:
        self.handler = handler
        self.fake: ResponsesWebSocketUpstream = handler.server.fake  # type: ignore[assignment]
        self.ws = Connection(ConnectionType.SERVER)
        self.local: set[str] = set()  # response ids this connection may continue from
        self.text = ""

    def send(self, payload: dict[str, Any]) -> None:
        data = self.ws.send(Message(data=json.dumps(payload)))
        self.handler.wfile.write(data)
        self.handler.wfile.flush()

    def serve(self) -> None:
        sock: socket.socket = self.handler.connection
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            self.ws.receive_data(data or None)
            for event in self.ws.events():
                if isinstance(event, Ping):
                    self.handler.wfile.write(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    with contextlib.suppress(Exception):  # the peer may be gone already
                        self.handler.wfile.write(self.ws.send(event.response()))
                    return
                elif isinstance(event, TextMessage | BytesMessage):
                    chunk = event.data if isinstance(event.data, str) else event.data.decode()
                    self.text += chunk
                    if event.message_finished:
                        text, self.text = self.text, ""
                        self.frame(text)
            if not data:
                return

    def frame(self, text: str) -> None:
        try:
            event = json.loads(text)
        except json.JSONDecodeError:
            event = None
        if not isinstance(event, dict) or event.get("type") != "response.create":
            self.fail(400, "invalid_request_error", "expected a response.create event")
            return
        body = {key: value for key, value in event.items() if key != "type"}
        self.fake.record(
            RecordedRequest(
                self.handler.path, self.handler.upgrade_headers, body, WEBSOCKET, DIALECT_RESPONSES
            )
        )
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.local and not self.fake.stored(previous):
            self.fail(
                400,
                "previous_response_not_found",
                f"Previous response with id '{previous}' not found.",
            )
            return
        if body.get("generate") is False:
            self.warm_up(body)
            return
        reply = self.fake.answer(DIALECT_RESPONSES, body)
        if reply.status != 200:
            self.send({"type": "error", "status": reply.status, **self.error_of(reply)})
            return
        renderer = Renderer(self.fake, DIALECT_RESPONSES, body, reply)
        for payload in sse_payloads(b"".join(renderer.responses_sse())):
            if payload.get("type") == "response.completed":
                self.keep(body, payload["response"]["id"])
            self.send(payload)

    @staticmethod
    def error_of(reply: Reply) -> dict[str, Any]:
        body = reply.error_body or error_body(DIALECT_RESPONSES, reply.status)
        return {"error": body.get("error", body)}

    def warm_up(self, body: dict[str, Any]) -> None:
        """`generate: false`: a response with no output the next one may continue from."""
        renderer = Renderer(self.fake, DIALECT_RESPONSES, body, Reply(text=""))
        response_id = self.fake.rand_id("resp_", 48, "0123456789abcdef")
        self.fake.remember_response(response_id, body, [])
        created = renderer.responses_object(response_id, [], done=False)
        self.send({"type": "response.created", "sequence_number": 0, "response": created})
        done = renderer.responses_object(response_id, [], done=True)
        self.send({"type": "response.completed", "sequence_number": 1, "response": done})
        self.keep(body, response_id)

    def keep(self, body: dict[str, Any], response_id: str) -> None:
        self.local.add(response_id)
        if body.get("store") is not False:
            self.fake.store(response_id)

    def fail(self, status: int, code: str, message: str) -> None:
        error = {"type": "invalid_request_error", "code": code, "message": message, "param": None}
        self.send({"type": "error", "status": status, "error": error})


class _WsHandler(_Handler):
    upgrade_headers: Headers

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        wants = self.headers.get("Upgrade", "").lower() == "websocket"
        if not (wants and path.endswith("/responses")):
            super().do_GET()
            return
        fake: ResponsesWebSocketUpstream = self.server.fake  # type: ignore[assignment]
        self.upgrade_headers = Headers((k, v) for k, v in self.headers.items())
        fake.upgrades.append(self.upgrade_headers)
        if fake.api_key is not None and self.headers.get("Authorization") != (
            f"Bearer {fake.api_key}"
        ):
            body = error_body(DIALECT_RESPONSES, 401, "Incorrect API key provided")
            self._send_json(401, body)
            return
        key = self.headers.get("Sec-WebSocket-Key", "")
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept_key(key))
        self.send_header("x-request-id", fake.rand_id("req_", 24))
        self.end_headers()
        self.wfile.flush()
        _Socket(self).serve()
        self.close_connection = True


class _WsServer(_Server):
    def __init__(self, fake: FakeUpstream, port: int) -> None:
        self.fake = fake
        socketserver.TCPServer.__init__(self, ("127.0.0.1", port), _WsHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client (the proxy) that cut the socket mid-answer is no error of the fake's."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class ResponsesWebSocketUpstream(FakeUpstream):
    """`FakeUpstream` plus the Responses API over WebSocket (see the module docstring)."""

    thread_name = "fake-upstream-ws"

    def __init__(
        self,
        script: Script | None = None,
        seed: int | None = None,
        *,
        port: int = 0,
        api_key: str | None = None,
    ) -> None:
        super().__init__(script, seed, port=port)
        self.api_key = api_key
        self.upgrades: list[Headers] = []  # the headers of every upgrade asked for
        self._stored: set[str] = set()

    def make_server(self, port: int) -> socketserver.TCPServer:
        return _WsServer(self, port)

    def store(self, response_id: str) -> None:
        with self._lock:
            self._stored.add(response_id)

    def stored(self, response_id: Any) -> bool:
        with self._lock:
            return response_id in self._stored

    def frames(self) -> list[RecordedRequest]:
        """The `response.create` events received over WebSocket, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.method == WEBSOCKET]
