"""A cgroup v2 of its own for each agent, where the platform lets flowproof make one.

The agent runs in a process group of its own, and its descendants carry a marker in their
environment (the proxy URL): that is how flowproof, and after a SIGKILL of flowproof its
keeper, find what an agent left. A daemon that calls `setsid()` (out of the group) and
clears its environment (no marker) escapes both. A cgroup does not let it: every
descendant of the agent stays in its cgroup whatever it does to its session, its group or
its environment (leaving needs write access to another cgroup, which only a privileged
agent has), and writing `1` to the cgroup's `cgroup.kill` (Linux 5.14) ends them all at once.

So, where flowproof can create a cgroup below its own (cgroup v2 mounted and writable:
root, or a subtree delegated to the user, such as a systemd user service), each agent
starts inside a fresh one: the child joins it before it execs. The keeper holds the cgroup
from before it exists (`process.CGROUP`): if flowproof dies, it kills everything in it and
removes it. At a normal end the flow does that itself, once the process group has ended.

Where it cannot (not Linux, cgroup v1 only, a read-only `/sys/fs/cgroup`, an unprivileged
user outside a delegated subtree) the agent starts as before, and only that one escape is
left open: a descendant that both leaves the agent's session and clears its environment
outlives a SIGKILL of flowproof (while flowproof lives, its subreaper sweep still ends it).
docs/cli.md says so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import sys
import time

from flowproof_cli.keeper import CGROUP
from flowproof_cli.process import KEEPER, create_held

PREFIX = "flowproof-"
_END_WAIT_S = 2.0  # killed processes leave their cgroup at once; this is only a bound
_POLL_S = 0.01


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (space, tab, newline, backslash octal)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def own_cgroup(mountinfo: str, cgroup: str) -> str | None:
    """The directory of this process's cgroup v2, from the texts of /proc/self/mountinfo and
    /proc/self/cgroup; None when there is no cgroup v2 (or this process is not seen in it)."""
    path = next((line[3:] for line in cgroup.splitlines() if line.startswith("0::")), None)
    if path is None:
        return None
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields or fields[fields.index("-") + 1 :][:1] != ["cgroup2"]:
            continue
        root, mount = _unescape(fields[3]), _unescape(fields[4])
        inner = path if root == "/" else path.removeprefix(root) if path.startswith(root) else None
        if inner is not None:
            return os.path.join(mount, inner.lstrip("/")).rstrip("/") or "/"
    return None


@functools.cache
def cgroup_base() -> str | None:
    """Where agents' cgroups are made: this process's own cgroup v2, if it can hold them."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
            mounts = mountinfo.read()
        with open("/proc/self/cgroup", encoding="utf-8") as cgroup:
            own = cgroup.read()
    except OSError:
        return None
    base = own_cgroup(mounts, own)
    if base is None or not os.path.isfile(os.path.join(base, "cgroup.procs")):
        return None
    return base if os.access(base, os.W_OK) else None


def _write(path: str, data: bytes) -> bool:
    """Write to a cgroup's control file, never creating one; whether it took."""
    try:
        descriptor = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(descriptor, data)
    except OSError:
        return False
    finally:
        os.close(descriptor)
    return True


class AgentCgroup:
    """One agent's cgroup: `join` in the child before exec, `end` once the agent's group
    has ended (kill what is left, remove the cgroup, release it from the keeper)."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def make(cls, base: str | None = None) -> AgentCgroup | None:
        """A fresh cgroup below `base` (default: `cgroup_base()`), held by the keeper from
        before it exists; None where none can be made (the agent then runs without)."""
        base = cgroup_base() if base is None else base
        if base is None:
            return None
        try:
            _, path = create_held(
                lambda: os.path.join(base, PREFIX + secrets.token_hex(6)),
                lambda name: os.mkdir(name, 0o755),
                kind=CGROUP,
            )
        except OSError:
            return None
        return cls(path)

    def join(self) -> None:  # pragma: no cover - runs in the child between fork and exec
        """Move the calling process into this cgroup (`0` is the writer itself). Nothing is
        raised: a child that cannot join runs as it would without a cgroup."""
        _write(os.path.join(self.path, "cgroup.procs"), b"0")

    def pids(self) -> set[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs"), encoding="ascii") as procs:
                return {int(line) for line in procs.read().split()}
        except (OSError, ValueError):
            return set()

    def kill(self) -> None:
        """SIGKILL everything in the cgroup: `cgroup.kill` where the kernel has it (5.14),
        else each member, pass after pass while one forks."""
        if _write(os.path.join(self.path, "cgroup.kill"), b"1"):
            return
        deadline = time.monotonic() + _END_WAIT_S
        while (members := self.pids()) and time.monotonic() < deadline:
            for pid in members:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(_POLL_S)

    def end(self) -> None:
        """Kill what is left in the cgroup, remove it, and release it from the keeper."""
        self.kill()
        deadline = time.monotonic() + _END_WAIT_S
        while True:
            try:
                os.rmdir(self.path)
            except FileNotFoundError:
                pass
            except OSError:  # still populated for a moment
                if time.monotonic() < deadline:
                    time.sleep(_POLL_S)
                    continue
                return  # the keeper keeps it, and tries again when flowproof exits
            KEEPER.release(CGROUP, self.path)
            return
