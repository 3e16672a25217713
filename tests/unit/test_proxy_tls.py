"""A replay's proxy carries no TLS: no certificate authority is generated for it, and a
client that speaks TLS to a listener has its connection closed, never a hang."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowproof_addons.guard import RequestGuard
from flowproof_addons.model import ModelBoundary
from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.runner.proxy_engine import ProxyEngine
from tests.unit.proxy_clients import LOOPBACK, REQUEST, RESPONSE, LoopThread, request


@pytest.fixture
def started() -> Iterator[tuple[LoopThread, list[ProxyEngine]]]:
    loop = LoopThread()
    hosts: list[ProxyEngine] = []
    try:
        yield loop, hosts
    finally:
        for host in hosts:
            loop.run(host.stop())
        loop.close()


def _host(started: tuple[LoopThread, list[ProxyEngine]], *, upstream_tls: bool) -> ProxyEngine:
    loop, hosts = started
    boundary = ModelBoundary()
    boundary.default = CassetteSession(
        Mode.REPLAY, recorded=[Turn("openai-chat", REQUEST, 200, RESPONSE)]
    )
    host = ProxyEngine([RequestGuard(), boundary], upstream_tls=upstream_tls)
    hosts.append(host)
    loop.run(host.start())
    return host


def _confdir_files(host: ProxyEngine) -> list[str]:
    return sorted(path.name for path in Path(host.master.options.confdir).iterdir())


def test_a_replay_proxy_generates_no_certificate_authority(
    started: tuple[LoopThread, list[ProxyEngine]],
) -> None:
    replaying = _host(started, upstream_tls=False)
    recording = _host(started, upstream_tls=True)
    assert _confdir_files(replaying) == []
    # The red path: a proxy that may dial a TLS upstream has its CA generated at start.
    assert "mitmproxy-ca.pem" in _confdir_files(recording)


def test_tls_to_a_replay_listener_is_closed_and_the_listener_keeps_serving(
    started: tuple[LoopThread, list[ProxyEngine]],
) -> None:
    host = _host(started, upstream_tls=False)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((LOOPBACK, host.port), timeout=10) as raw,
        pytest.raises((ssl.SSLError, ConnectionError, OSError)) as refused,
    ):
        context.wrap_socket(raw, server_hostname="localhost")
    assert not isinstance(refused.value, TimeoutError), "the handshake hung"
    status, _, body = request(
        host.port, "POST", "/v1/chat/completions", json.dumps(REQUEST).encode()
    )
    assert status == 200 and b"hello from the cassette" in body
