"""Filesystem observation: destructive calls (unlink, rename, truncate, open with O_TRUNC...)
are described for the report and then answered CONTINUE. Nothing is prevented, and a fault
while describing one still lets the call run.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from flowproof_cli.egress import constants as c
from flowproof_cli.egress import kernel
from flowproof_cli.egress.handlers import Host
from flowproof_cli.egress.kernel import Notification
from flowproof_cli.egress.report import FsEvent

UNRESOLVED = "unresolved"


def open_flags(flags: int) -> str:
    """O_WRONLY|O_CREAT|O_TRUNC, as a report prints it."""
    names = [("O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE")[flags & c.O_ACCMODE]]
    names.extend(name for bit, name in c.OPEN_FLAG_NAMES if flags & bit)
    return "|".join(names)


class FsObserver:
    """Registers every filesystem trap into a supervisor, as observed (CONTINUE) calls."""

    def __init__(self, supervisor: Host) -> None:
        self.supervisor = supervisor
        self._describers: dict[str, Callable[[Notification], str | None]] = {
            "unlink": lambda n: self._path(n, n.args[0]),
            "rmdir": lambda n: self._path(n, n.args[0]),
            "truncate": lambda n: self._path(n, n.args[0]),
            "creat": lambda n: f"[{open_flags(0o1101)}] {self._path(n, n.args[0])}",
            "unlinkat": self._unlinkat,
            "ftruncate": self._ftruncate,
            "rename": lambda n: f"{self._path(n, n.args[0])} -> {self._path(n, n.args[1])}",
            "renameat": self._renameat,
            "renameat2": self._renameat,
            "open": lambda n: f"[{open_flags(n.arg_int(1))}] {self._path(n, n.args[0])}",
            "openat": lambda n: f"[{open_flags(n.arg_int(2))}] {self._at(n, 0, 1)}",
            "openat2": self._openat2,
        }
        for name in c.FS_TRAPS:
            supervisor.register(c.NR[name], self.observe, observe_only=True)

    def observe(self, n: Notification) -> None:
        name = c.NAME_OF[n.nr]
        detail: str | None
        try:
            describe = self._describers.get(name)
            detail = describe(n) if describe is not None else UNRESOLVED
        finally:
            # Observation only: the syscall runs whatever was read.
            self.supervisor.listener.respond(n.id, cont=True)
        if detail is not None:
            self.supervisor.report.add_fs(FsEvent(name, detail, self.supervisor.now_ms()))

    def _path(self, n: Notification, pointer: int, dirfd: int = c.AT_FDCWD) -> str:
        """The absolute path a call names, resolved against its cwd or its dirfd."""
        try:
            path = kernel.read_string(n.pid, pointer).decode("utf-8", "replace")
        except OSError:
            return UNRESOLVED
        if path.startswith("/"):
            return path
        try:
            base = os.readlink(
                f"/proc/{n.pid}/cwd" if dirfd == c.AT_FDCWD else f"/proc/{n.pid}/fd/{dirfd}"
            )
        except OSError:
            return path
        return os.path.join(base, path) if path else base

    def _at(self, n: Notification, dirfd_arg: int, path_arg: int) -> str:
        """The path of a `*at` call: its dirfd and path arguments."""
        return self._path(n, n.args[path_arg], n.arg_int(dirfd_arg))

    def _unlinkat(self, n: Notification) -> str:
        flag = " [AT_REMOVEDIR]" if n.arg_int(2) & c.AT_REMOVEDIR else ""
        return f"{self._at(n, 0, 1)}{flag}"

    def _ftruncate(self, n: Notification) -> str:
        try:
            return os.readlink(f"/proc/{n.pid}/fd/{n.arg_int(0)}")
        except OSError:
            return UNRESOLVED

    def _renameat(self, n: Notification) -> str:
        return f"{self._at(n, 0, 1)} -> {self._at(n, 2, 3)}"

    def _openat2(self, n: Notification) -> str | None:
        """openat2 hides its flags in a struct open_how: only O_TRUNC is reported."""
        if n.args[3] < 8:
            return None  # the kernel refuses a short open_how itself
        try:
            (flags,) = struct.unpack("<Q", kernel.read_memory(n.pid, n.args[2], 8))
        except OSError:
            path = self._at(n, 0, 1)
            at_ms = self.supervisor.now_ms()
            self.supervisor.report.add_fs_fault(f"openat2 {path}: open_how unreadable at {at_ms}ms")
            return None
        if not flags & c.O_TRUNC:
            return None  # an ordinary open through openat2
        return f"[{open_flags(flags)}] {self._at(n, 0, 1)}"
