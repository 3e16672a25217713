"""Descendants that leave the agent's process group still end with the flow (Linux).

Killing the agent's process group misses a descendant that called `setsid` (a daemon, a
`setsid cmd &`). flowproof therefore makes itself a child subreaper: such an orphan is
reparented to flowproof instead of init, and once the agent's group has been ended, every
child flowproof did not have before the agent started is killed and reaped.

Flows run side by side in one process, so a flow ends only the orphans that carry its own
marker (a variable of its agent's environment, inherited by every descendant): never the
agent, hook or orphan of the flow beside it. Whatever is left when the run ends (an orphan
that cleared its environment) goes in one last sweep. The keeper (`process.KEEPER`), a
child of flowproof too, is never one of them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Set

from flowproof_cli.process import KEEPER

PR_SET_CHILD_SUBREAPER = 36
_SETTLE_S = 0.05  # a dying parent's children are reparented asynchronously
_PASSES = 5


def become_subreaper() -> bool:
    """Adopt orphaned descendants (idempotent). False where the platform has no such thing."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int | None = None) -> set[int]:
    """Process ids whose parent is `pid` (default: this process), read from /proc."""
    parent = os.getpid() if pid is None else pid
    found: set[int] = set()
    with contextlib.suppress(FileNotFoundError):
        entries = os.listdir("/proc")
        for entry in entries:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:  # fields after "comm)": state, ppid, ...
                found.add(int(entry))
    return found


def carries(pid: int, marker: bytes) -> bool:
    """Whether the process's environment holds `marker` (a whole `NAME=value` entry)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return marker in environ.read().split(b"\0")
    except OSError:
        return False


def end_adopted(
    before: Set[int],
    exclude: Set[int] = frozenset(),
    marker: bytes | None = None,
    *,
    settle: bool = True,
) -> list[int]:
    """Kill and reap every child that appeared since `before` (orphans adopted from the
    agent's tree) and, with `marker`, carries it; repeating while killing them orphans
    more. `settle` waits first for orphans still being reparented. Returns the pids ended."""
    ended: list[int] = []
    for number in range(_PASSES):
        if number or settle:
            time.sleep(_SETTLE_S)
        adopted = children() - set(before) - set(exclude) - KEEPER.pids()
        if marker is not None:
            adopted = {pid for pid in adopted if carries(pid, marker)}
        if not adopted:
            break
        for pid in adopted:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in adopted:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
            ended.append(pid)
    return ended


_settle_until = 0.0  # until when orphans of a group just signalled may still be reparented


def note_dying() -> None:
    """A process group was just signalled with members left: the sweep waits for their
    orphans to be reparented. (A group that had already exited whole has none in flight:
    the kernel reparents a dead parent's children as it exits.)"""
    global _settle_until  # noqa: PLW0603 (one process's clock, read by the sweep)
    _settle_until = time.monotonic() + _SETTLE_S


def sweep(before: Set[int]) -> list[int]:
    """At the end of a run: end every child still adopted since `before`, marked or not."""
    if not sys.platform.startswith("linux"):
        return []
    wait = _settle_until - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    return end_adopted(before, settle=False)
