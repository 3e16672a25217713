"""The egress lab's own measuring, on the host's loopback (no namespace, no root): what it
reports must count every connection that reached its servers."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.egress.lab import LocalServers

CONNECTIONS = 20
#: Each accept this late: the accept threads fall behind, as under `make test`'s load.
ACCEPT_LAG_S = 0.02


class _Stopped(Exception):
    """The servers were stopped: the accept thread ends."""


class _Lagging:
    """A listening socket whose accepts each wait first; once stopped, its thread ends."""

    def __init__(self, server: socket.socket, stopped: threading.Event) -> None:
        self._server, self._stopped = server, stopped

    def accept(self) -> tuple[socket.socket, object]:
        time.sleep(ACCEPT_LAG_S)
        try:
            return self._server.accept()
        except OSError:
            if self._stopped.is_set():
                raise _Stopped from None
            raise


class _LaggingServers(LocalServers):
    def __init__(self, folder: Path) -> None:
        self.stopped = threading.Event()
        super().__init__(folder)

    def _accept(self, server: socket.socket, key: str) -> None:
        with contextlib.suppress(_Stopped):
            super()._accept(_Lagging(server, self.stopped), key)  # type: ignore[arg-type]

    def _udp(self) -> None:
        """Not measured here: no UDP thread to stop."""

    def stop(self) -> None:
        self.stopped.set()
        for server in (self.tcp, self.tcp6, self.unix):
            server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
            server.close()
        self.udp.close()


@pytest.fixture
def lagging(tmp_path: Path) -> Iterator[_LaggingServers]:
    servers = _LaggingServers(tmp_path)
    try:
        yield servers
    finally:
        servers.stop()


def test_connections_still_queued_are_counted_once_the_accepts_settle(
    lagging: _LaggingServers,
) -> None:
    """The agent opens and closes its connections at once; under load they still wait in
    the listen queue when the agent is done. `settled` waits for the accept threads to
    drain it: a count read at once (the lab before) missed some (955 of 1032)."""
    port = lagging.context()["local_tcp"]
    for _ in range(CONNECTIONS):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    at_once = dict(lagging.counts)["tcp"]
    assert at_once < CONNECTIONS, "the accepts kept up: this run says nothing of settling"
    assert lagging.settled()["tcp"] == CONNECTIONS
