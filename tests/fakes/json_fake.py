"""What the single-provider fakes (ollama_upstream.py, cohere_upstream.py) share: a handler
that answers JSON or a stream of one media type, and a threading server that knows its fake.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.fake_upstream import HOST


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with Content-Length on every answer, and no request log on stderr."""

    protocol_version = "HTTP/1.1"

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


class FakeServer(ThreadingHTTPServer):
    """One fake's server on 127.0.0.1: its handler reaches the fake as `self.server.fake`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, fake: Any, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        self.fake = fake
        super().__init__((HOST, port), handler)
