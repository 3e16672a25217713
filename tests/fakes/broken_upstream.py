"""A scripted broken model upstream on 127.0.0.1, one failure mode per instance (stdlib only).

Record must survive an upstream that misbehaves, so each mode answers every request the same
broken way, at the byte level (a raw socket, not http.server, so it can break HTTP itself):

* ``garbage``: HTTP 200 claiming JSON, with bytes that are not JSON at all
* ``sse-cut``: HTTP 200 ``text/event-stream`` whose body ends mid-event (the connection closes
  where the body was read to its end, so HTTP sees a complete answer and only SSE is cut)
* ``status``: the given status (401, 429, 500, 503...) with a JSON error body and any extra
  headers (``Retry-After``)
* ``drop``: a ``Content-Length`` promising more than is sent, then the connection closes
* ``close``: the request is read, then the connection closes without a byte
* ``hang``: the request is read and never answered (until ``stop()``)
* ``sse-hang``: HTTP 200 ``text/event-stream`` headers, then silence (until ``stop()``)

Importable::

    with BrokenUpstream("status", status=429, headers={"Retry-After": "7"}) as upstream:
        base = upstream.base_url        # "http://127.0.0.1:PORT"
        ...
        upstream.requests               # the raw request heads, in arrival order

As a process::

    python -m tests.fakes.broken_upstream --mode hang    # from the repository root
    # first stdout line: "listening on http://127.0.0.1:PORT"; serves until killed.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.fake_upstream import HOST, ThreadServed

MODES = ("garbage", "sse-cut", "status", "drop", "close", "hang", "sse-hang")
GARBAGE = b"\x00\xff<html>upstream \xfe exploded{{{"
SSE_CUT = b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"delta":{"cont'
DEFAULT_ERROR = {"error": {"message": "Incorrect API key provided", "type": "invalid_request"}}
_HEAD_LIMIT = 65536


@dataclass
class Failure:
    """How every request is answered: the mode, and for ``status`` what the answer carries."""

    mode: str
    status: int = 200
    body: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_ERROR))
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}: use one of {', '.join(MODES)}")


def _head(status: int, reason: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def answer_bytes(failure: Failure) -> bytes | None:
    """The bytes written for one request, or None for the modes that write nothing."""
    if failure.mode == "garbage":
        headers = {"Content-Type": "application/json", "Content-Length": str(len(GARBAGE))}
        return _head(200, "OK", headers) + GARBAGE
    if failure.mode == "sse-cut":
        headers = {"Content-Type": "text/event-stream", "Connection": "close"}
        return _head(200, "OK", headers) + SSE_CUT
    if failure.mode == "sse-hang":
        return _head(200, "OK", {"Content-Type": "text/event-stream", "Connection": "close"})
    if failure.mode == "drop":
        headers = {"Content-Type": "application/json", "Content-Length": "4096"}
        return _head(200, "OK", headers) + b'{"id":"chatcmpl-1","choices":[{"mess'
    if failure.mode == "status":
        body = json.dumps(failure.body).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        headers.update(failure.headers)
        return _head(failure.status, "Broken", headers) + body
    return None


def _read_request(sock: socket.socket) -> bytes | None:
    """The request head and its Content-Length body; None when the client went away."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk or len(data) > _HEAD_LIMIT:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        head = _read_request(sock)
        if head is None:
            return
        upstream = self.server.owner
        upstream.requests.append(head.decode("latin-1"))
        answer = answer_bytes(upstream.failure)
        if upstream.failure.mode == "hang":
            upstream.stopping.wait()  # accepted, read, never answered
            return
        if answer is not None:
            sock.sendall(answer)
        if upstream.failure.mode == "sse-hang":
            upstream.stopping.wait()  # the stream began and stays silent
            return
        sock.shutdown(socket.SHUT_RDWR)  # every mode ends the connection after one answer


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: BrokenUpstream, port: int) -> None:
        self.owner = owner
        super().__init__((HOST, port), _Handler)


class BrokenUpstream(ThreadServed):
    """A model upstream on 127.0.0.1 that answers every request with one failure mode."""

    thread_name = "broken-upstream"

    def __init__(self, mode: str, *, port: int = 0, **failure: Any) -> None:
        super().__init__(port)
        self.failure = Failure(mode, **failure)
        self.requests: list[str] = []
        self.stopping = threading.Event()

    def make_server(self, port: int) -> socketserver.TCPServer:
        return _Server(self, port)

    def stop(self) -> None:
        """Stop accepting and release every hanging handler."""
        self.stopping.set()
        super().stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--status", type=int, default=500)
    parser.add_argument("--header", action="append", default=[], help="NAME=VALUE")
    args = parser.parse_args(argv)
    headers = dict(item.split("=", 1) for item in args.header)
    upstream = BrokenUpstream(args.mode, port=args.port, status=args.status, headers=headers)
    print(f"listening on {upstream.start()}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        upstream.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
