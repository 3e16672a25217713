"""Listening sockets bound before the proxy engine loads: loopback only, a taken port named."""

from __future__ import annotations

import socket

import pytest

from flowproof_cli.errors import ConfigError, PortInUseError
from flowproof_cli.runner.listeners import bind_loopback, port_of


def test_a_bound_socket_listens_on_loopback_and_queues_connections() -> None:
    sock = bind_loopback()
    try:
        host, port = sock.getsockname()
        assert (host, port) == ("127.0.0.1", port_of(sock)) and port > 0
        # Nobody accepts yet: the kernel completes the connection and queues it.
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        sock.close()


def test_a_taken_port_is_a_named_error() -> None:
    taken = bind_loopback()
    try:
        with pytest.raises(PortInUseError) as caught:
            bind_loopback(port_of(taken))
        assert caught.value.port == port_of(taken)
        assert f"127.0.0.1:{port_of(taken)} is already in use. Fix:" in str(caught.value)
    finally:
        taken.close()


def test_a_port_that_cannot_be_bound_says_why() -> None:
    with pytest.raises(ConfigError, match=r"cannot listen on 127\.0\.0\.1:70000"):
        bind_loopback(70000)


def test_accepted_connections_get_tcp_nodelay() -> None:
    """A reply written in two parts must not wait for the peer's delayed ACK (~40 ms)."""
    import asyncio

    async def scenario() -> int:
        sock = bind_loopback()
        seen: list[int] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted = writer.get_extra_info("socket")
            seen.append(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(handle, sock=sock)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port_of(sock))
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()
        finally:
            server.close()
        return seen[0]

    assert asyncio.run(scenario()) != 0
