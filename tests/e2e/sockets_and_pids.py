"""Helpers for tests about ports and processes: free ports, listeners, and gone pids."""

from __future__ import annotations

import itertools
import os
import random
import socket
import time
from collections.abc import Callable
from pathlib import Path

_TCP_LISTEN = "0A"


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_CHOSEN = 10000  # below this, ports belong to well-known services
_WORKER_BLOCK = 2000  # ports per pytest-xdist worker, so two workers never pick alike
_chosen = itertools.count(random.randrange(_WORKER_BLOCK))


def free_port() -> int:
    """A loopback port nobody listens on, that stays free until the test binds it.

    A port from `bind(0)` comes from the kernel's ephemeral range; released, it can be handed
    to the next `bind(0)` or outgoing connect of any process (another flow's proxy, say) before
    the test uses it. So the port is chosen below that range, where the kernel never hands
    ports out, in a block of its own per xdist worker, and checked free by binding it."""
    low = _ephemeral_low()
    if low - _LOWEST_CHOSEN < _WORKER_BLOCK:
        return _kernel_port()  # no room below the range on this machine
    blocks = (low - _LOWEST_CHOSEN) // _WORKER_BLOCK
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    start = _LOWEST_CHOSEN + (int(worker) if worker.isdigit() else 0) % blocks * _WORKER_BLOCK
    for _ in range(_WORKER_BLOCK):
        port = start + next(_chosen) % _WORKER_BLOCK
        if _bindable(port):
            return port
    return _kernel_port()


def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _LOWEST_CHOSEN  # unknown range: leave it to the kernel


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _kernel_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def is_listening(port: int) -> bool:
    """True when some socket on this machine LISTENs on the TCP port (per /proc/net/tcp*)."""
    return port in _listeners().values()


def listeners_of(pids: set[int]) -> dict[str, int]:
    """The listening sockets these processes hold: socket inode -> port."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return {inode: port for inode, port in _listeners().items() if inode in inodes}


def still_listening(sockets: dict[str, int]) -> list[int]:
    """The ports of `sockets` (from `listeners_of`) whose very socket still listens.

    By inode, not by port: once a process is gone, the kernel may hand its port to another
    process's `bind(0)`, and a check by port would blame the dead process for it."""
    alive = _listeners()
    return sorted(port for inode, port in sockets.items() if inode in alive)


def holders_of(port: int) -> set[int]:
    """The pids of the processes holding a socket that listens on the TCP port."""
    inodes = {f"socket:[{inode}]" for inode, held in _listeners().items() if held == port}
    holders: set[int] = set()
    for entry in os.listdir("/proc") if inodes else ():
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") in inodes for fd in fds):
                holders.add(int(entry))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return holders


def _listeners() -> dict[str, int]:
    """Every TCP socket in LISTEN on this machine (per /proc/net/tcp*): inode -> port."""
    found: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == _TCP_LISTEN:
                found[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    return found


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def is_gone(pid: int) -> bool:
    """True when no live process has this pid (a zombie awaiting its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


def eventually(check: Callable[[], bool], within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
