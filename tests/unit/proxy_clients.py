"""Blocking clients for tests of the in-process proxy: a loop thread to run it on, raw and
plain HTTP exchanges, a listener that counts what reaches it, one recorded chat turn; and
`mcp_boundary`, the proxy an MCP HTTP session is served through, and `mcp_client`, an
HTTP client initialized through it."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
from collections.abc import AsyncIterator
from concurrent.futures import Future
from typing import Any

import httpx

from flowproof_addons.guard import RequestGuard
from flowproof_addons.mcp_http import McpHttpBoundary
from flowproof_cli.mcp.http import HttpMcpSession
from flowproof_cli.runner.proxy_engine import ProxyEngine
from tests.unit.trace_builders import chat_completion

LOOPBACK = "127.0.0.1"
REQUEST = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
RESPONSE = chat_completion("hello from the cassette")
#: What a streamable-HTTP MCP client accepts.
ACCEPT_BOTH = {"accept": "application/json, text/event-stream"}


class LoopThread:
    """An asyncio loop in a background thread, so tests can use blocking clients."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Any, timeout: float = 20) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@contextlib.asynccontextmanager
async def mcp_boundary(session: HttpMcpSession) -> AsyncIterator[int]:
    """A proxy on a loopback port (the request guard, then the MCP HTTP boundary) serving
    `session` on it, as a run would: its port. The boundary's streams are awaited to their
    end once the body is done."""
    boundary = McpHttpBoundary()
    async with ProxyEngine([RequestGuard(), boundary]) as proxy:
        boundary.sessions[proxy.port] = session
        yield proxy.port
        await boundary.done()


@contextlib.asynccontextmanager
async def mcp_client(
    session: HttpMcpSession, path: str, protocol: str
) -> AsyncIterator[tuple[httpx.AsyncClient, str, httpx.Response]]:
    """`mcp_boundary` serving `session`, and a client that sent its `initialize` (request 1,
    `protocol` its version) to `path` there: the client, the endpoint's URL and the answer
    to `initialize`, for the caller to judge."""
    async with mcp_boundary(session) as port:
        url = f"http://{LOOPBACK}:{port}{path}"
        async with httpx.AsyncClient(timeout=20, headers=ACCEPT_BOTH) as client:
            params = {"protocolVersion": protocol}
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
            answer = await client.post(url, content=json.dumps(initialize).encode())
            yield client, url, answer


def raw_exchange(port: int, data: bytes) -> http.client.HTTPResponse:
    """Send raw bytes and parse one HTTP response (body read fully)."""
    sock = socket.create_connection((LOOPBACK, port), timeout=10)
    try:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        response.begin()
        response.body = response.read()  # type: ignore[attr-defined]
        return response
    finally:
        sock.close()


def request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


class Listener:
    """A loopback TCP listener that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server((LOOPBACK, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0

    def poll(self) -> int:
        try:
            while True:
                connection, _ = self.sock.accept()
                self.accepted += 1
                connection.close()
        except TimeoutError:
            return self.accepted

    def close(self) -> None:
        self.sock.close()
