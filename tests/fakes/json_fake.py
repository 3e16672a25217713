"""What the single-provider fakes (ollama_upstream.py, cohere_upstream.py) share: a handler
that answers JSON or a stream of one media type, a threading server that knows its fake, and
the fake's own state (its script, the key it checks, the requests it received).
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.fake_upstream import (
    DIALECT_CHAT,
    HOST,
    Headers,
    RecordedRequest,
    Reply,
    ThreadServed,
    conversation_of,
    decide,
)

#: A provider fake's script: the request body in, the model's reply out.
JsonScript = Callable[[dict[str, Any]], Reply]


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with Content-Length on every answer, and no request log on stderr."""

    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, raw: bytes, media: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
        self.wfile.flush()

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode())

    def _read_json(self) -> Any:
        """The request's JSON body (None: not JSON)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return None

    def _record(self, body: dict[str, Any], *how: str) -> Headers:
        """Hand the request to the fake's log (`how`: its method and dialect); its headers."""
        headers = Headers((k, v) for k, v in self.headers.items())
        self.server.fake.record(RecordedRequest(self.path, headers, body, *how))
        return headers


class FakeServer(ThreadingHTTPServer):
    """One fake's server on 127.0.0.1: its handler reaches the fake as `self.server.fake`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, fake: Any, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        self.fake = fake
        super().__init__((HOST, port), handler)


class JsonFake(ThreadServed):
    """A single-provider fake on 127.0.0.1: a subclass names its handler (which speaks the
    provider's API and reaches the fake as `self.server.fake`), its thread, and the key it
    checks when none is given (None: it checks none)."""

    handler: type[JsonHandler]
    default_key: str | None = None

    def __init__(
        self, script: JsonScript | None = None, *, key: str | None = None, port: int = 0
    ) -> None:
        super().__init__(port)
        self.script = script
        self.key = self.default_key if key is None else key
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._rng = random.Random()

    def make_server(self, port: int) -> FakeServer:
        return FakeServer(self, port, self.handler)

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def answer(self, body: dict[str, Any]) -> Reply:
        """The script's reply, or the tool loop of `fake_upstream.decide` on the chat the
        request holds (`as_chat`)."""
        if self.script is not None:
            return self.script(body)
        return decide(conversation_of(DIALECT_CHAT, self.as_chat(body)))

    def as_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as a Chat Completions body (the provider's own shape by default)."""
        return body
