"""The tests' socket helpers (`tests/e2e/sockets_and_pids.py`) are exact under load.

`free_port`: a port written into a spec and bound later by another process must not be
taken by the kernel in between. A CI run lost `driver-service-silent` that way: its
`proxy_port`, taken from `bind(0)`, went to another flow's listener ("proxy_port 46307 is
already in use"). `still_listening`: a leak check after a kill must not blame a dead process
for a port the kernel has since handed to another one."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.e2e import sockets_and_pids
from tests.e2e.sockets_and_pids import (
    free_port,
    holders_of,
    is_listening,
    listeners_of,
    still_listening,
)

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral() -> range:
    low, high = (int(part) for part in _RANGE.read_text().split())
    return range(low, high + 1)


pytestmark = pytest.mark.skipif(not _RANGE.exists(), reason="no /proc ephemeral port range")


def test_a_chosen_port_is_outside_the_range_the_kernel_hands_out() -> None:
    chosen = [free_port() for _ in range(20)]
    assert not [port for port in chosen if port in _ephemeral()], chosen


def test_the_kernel_hands_out_ports_inside_that_range() -> None:
    """The twin: `bind(0)` itself lands in the range, so the check above can fail."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        assert probe.getsockname()[1] in _ephemeral()


def test_a_chosen_port_can_be_listened_on_and_is_not_chosen_twice() -> None:
    chosen = [free_port() for _ in range(50)]
    assert len(set(chosen)) == len(chosen)
    with socket.socket() as server:
        server.bind(("127.0.0.1", chosen[0]))
        server.listen(1)


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")  # the block 10000-11999
    monkeypatch.setattr(sockets_and_pids, "_ephemeral_low", lambda: 32768)
    taken = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen(1)
        monkeypatch.setattr(sockets_and_pids, "_chosen", iter([taken - 10000, 0, 1]))
        picked = free_port()
    assert picked != taken and picked in range(10000, 12000), (taken, picked)


def test_two_workers_choose_from_separate_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        blocks.append({free_port() // 2000 for _ in range(10)})
    assert blocks[0].isdisjoint(blocks[1]), blocks


def _own_listener(sock: socket.socket) -> dict[str, int]:
    port = sock.getsockname()[1]
    return {inode: p for inode, p in listeners_of({os.getpid()}).items() if p == port}


def test_a_listener_still_open_is_reported() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", free_port()))
        server.listen(1)
        held = _own_listener(server)
        assert list(held.values()) == [server.getsockname()[1]]
        assert still_listening(held) == list(held.values())


def test_a_port_another_socket_took_over_is_not_blamed_on_the_closed_one() -> None:
    port = free_port()
    with socket.socket() as first:
        first.bind(("127.0.0.1", port))
        first.listen(1)
        held = _own_listener(first)
    with socket.socket() as second:  # what a later bind(0) elsewhere may do
        second.bind(("127.0.0.1", port))
        second.listen(1)
        assert is_listening(port)  # by port: the closed socket would be blamed
        assert still_listening(held) == []


def test_the_holders_of_a_listening_port_are_named_and_none_once_it_closed() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", free_port()))
        server.listen(1)
        port = server.getsockname()[1]
        assert holders_of(port) == {os.getpid()}
    assert holders_of(port) == set()
