"""The real in-process proxy: loopback only, no tunnel, no relay, model routes from a cassette."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flowproof_addons.guard import RequestGuard
from flowproof_addons.model import ModelBoundary
from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.runner.proxy_engine import ProxyEngine
from tests.unit.proxy_clients import (
    LOOPBACK,
    REQUEST,
    RESPONSE,
    Listener,
    LoopThread,
    raw_exchange,
    request,
)


@dataclass
class Running:
    proxy: ProxyEngine
    boundary: ModelBoundary
    session: CassetteSession

    @property
    def port(self) -> int:
        return self.proxy.port


@pytest.fixture
def running() -> Iterator[Running]:
    loop = LoopThread()
    boundary = ModelBoundary()
    session = CassetteSession(Mode.REPLAY, recorded=[Turn("openai-chat", REQUEST, 200, RESPONSE)])
    boundary.default = session
    proxy = ProxyEngine([RequestGuard(), boundary])

    async def start() -> None:
        await proxy.start()

    loop.run(start())
    try:
        yield Running(proxy, boundary, session)
    finally:
        loop.run(proxy.stop())
        loop.close()


def test_connect_is_refused(running: Running) -> None:
    target = Listener()
    try:
        response = raw_exchange(
            running.port,
            f"CONNECT {LOOPBACK}:{target.port} HTTP/1.1\r\nHost: {LOOPBACK}:{target.port}\r\n\r\n".encode(),
        )
        assert response.status in (400, 405)
        assert target.poll() == 0
    finally:
        target.close()
    assert running.session.requests == 0


def test_absolute_form_request_is_refused_and_reaches_nothing(running: Running) -> None:
    target = Listener()
    try:
        for url in (
            "http://example.com/",
            f"http://{LOOPBACK}:{target.port}/",
            f"http://{LOOPBACK}:{target.port}/v1/chat/completions",
        ):
            response = raw_exchange(
                running.port,
                f"GET {url} HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\n\r\n".encode(),
            )
            assert response.status == 400, url
            body = json.loads(response.body)  # type: ignore[attr-defined]
            error = {
                "message": "flowproof: absolute-form request lines are refused: "
                "this proxy is not a relay",
                "type": "flowproof_refused",
            }
            if url.endswith("/v1/chat/completions"):  # a model route: its dialect's shape
                error["code"] = "flowproof_refused"
            assert body == {"error": error}
        assert target.poll() == 0
    finally:
        target.close()
    assert running.session.requests == 0


def test_unknown_endpoint_is_a_404_naming_it_and_fails_the_flow(running: Running) -> None:
    status, headers, body = request(running.port, "POST", "/v1/audio/speech?x=1", b"{}")
    assert status == 404
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["type"] == "flowproof_unknown_endpoint"
    said = (
        "POST /v1/audio/speech is not a model endpoint flowproof records (it records "
        ".../chat/completions"
    )
    assert error["message"].startswith(f"flowproof: {said}")
    assert "GET .../models" in error["message"]
    assert running.session.requests == 0
    # The agent lost a call it meant to make: the flow fails, naming it.
    assert len(running.session.errors) == 1
    assert running.session.errors[0].startswith(f"flowproof: {said}")


@pytest.mark.parametrize(("method", "path"), [("HEAD", "/"), ("OPTIONS", "/v1/x"), ("GET", "/")])
def test_a_probe_is_a_404_that_fails_no_flow(running: Running, method: str, path: str) -> None:
    """Claude Code sends `HEAD /` to its base URL before its first call."""
    status, _, _ = request(running.port, method, path)
    assert status == 404
    assert running.session.errors == []


def test_a_call_to_the_root_is_not_a_probe(running: Running) -> None:
    """A client that lost its path posts its call to the base URL: a lost call, it fails."""
    status, _, _ = request(running.port, "POST", "/", b"{}")
    assert status == 404
    assert running.session.errors[0].startswith("flowproof: POST / is not a model endpoint")


def test_a_listing_by_another_method_is_not_a_listing(running: Running) -> None:
    status, _, body = request(running.port, "POST", "/v1/models", b"{}")
    assert status == 404
    assert "POST /v1/models is not a model endpoint" in json.loads(body)["error"]["message"]


def test_model_route_is_answered_from_the_cassette(running: Running) -> None:
    status, headers, body = request(
        running.port,
        "POST",
        "/v1/chat/completions",
        json.dumps(REQUEST).encode(),
        {"content-type": "application/json", "authorization": "Bearer placeholder"},
    )
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == RESPONSE
    assert running.session.served == [0]


def test_streamed_model_route_is_answered_as_sse(running: Running) -> None:
    status, headers, body = request(
        running.port,
        "POST",
        "/chat/completions",
        json.dumps({**REQUEST, "stream": True}).encode(),
        {"content-type": "application/json"},
    )
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert body.startswith(b"data: {")
    assert body.endswith(b"data: [DONE]\n\n")
    assert running.session.served == [0]


def test_non_json_body_is_a_400(running: Running) -> None:
    status, headers, body = request(
        running.port, "POST", "/v1/chat/completions", b"this is not json", {}
    )
    assert status == 400
    assert headers["x-should-retry"] == "false"
    assert json.loads(body)["error"]["message"] == (
        "flowproof: the request to /v1/chat/completions is not a JSON object"
    )
    assert running.session.served == []


def test_divergence_is_a_409_that_sdks_do_not_retry(running: Running) -> None:
    other = {**REQUEST, "model": "gpt-4o"}
    status, headers, body = request(
        running.port, "POST", "/v1/chat/completions", json.dumps(other).encode()
    )
    assert status == 409
    assert headers["x-should-retry"] == "false"
    assert json.loads(body)["error"]["message"] == (
        "flowproof: turn 1: model changed: recorded gpt-4o-mini, replayed gpt-4o"
    )


def _listening_addresses(port: int) -> list[str]:
    """Local addresses of sockets in LISTEN state on this port, from /proc/net/tcp{,6}."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A = LISTEN
                found.append(address)
    return found


def test_listener_is_bound_to_loopback_only(running: Running) -> None:
    assert running.port > 0
    addresses = running.proxy.listen_addrs()
    assert addresses
    assert {(host, port) for host, port, *_ in addresses} == {(LOOPBACK, running.port)}
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp to inspect the kernel's view")
    assert _listening_addresses(running.port) == ["0100007F"]  # 127.0.0.1, IPv4 only


def test_port_is_closed_after_stop() -> None:
    loop = LoopThread()
    boundary = ModelBoundary()
    boundary.default = CassetteSession(Mode.REPLAY)
    proxy = ProxyEngine([RequestGuard(), boundary])
    try:
        port = loop.run(proxy.start())
        with socket.create_connection((LOOPBACK, port), timeout=5):
            pass
        loop.run(proxy.stop())
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((LOOPBACK, port), timeout=5).close()
    finally:
        loop.close()
