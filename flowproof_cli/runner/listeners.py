"""Loopback listening sockets, bound before the proxy engine is loaded.

A flow's port must be known before its agent starts (the agent is told it), but the agent
need not wait for mitmproxy: the socket is bound and listening here, the agent is spawned,
and the proxy (imported and started meanwhile) begins accepting on the same socket. A
connection the agent opens in between waits in the kernel's accept queue.
"""

from __future__ import annotations

import errno
import socket

from flowproof_cli.errors import ConfigError, PortInUseError
from flowproof_cli.runner.descriptors import FIX, out_of_descriptors

LOOPBACK = "127.0.0.1"
BACKLOG = 512  # agents that open many connections at once must not be refused


def bind_loopback(port: int = 0) -> socket.socket:
    """A listening, non-blocking TCP socket on 127.0.0.1:port (0: any free port)."""
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets whose `proto` says
    # TCP, and without it a response written as head + body waits ~40 ms for a delayed ACK.
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except OSError as exc:  # no descriptor left for it: said as that, with the limit
        exhausted = out_of_descriptors(exc)
        why = f"{exhausted}. {FIX}" if exhausted else exc.strerror or str(exc)
        raise ConfigError(f"cannot listen on {LOOPBACK}:{port or 'any'}: {why}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT
        sock.bind((LOOPBACK, port))
        sock.listen(BACKLOG)
    except (OSError, OverflowError) as exc:
        sock.close()
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            raise PortInUseError(port) from None
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot listen on {LOOPBACK}:{port or 'any'}: {why}") from None
    sock.setblocking(False)
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])
