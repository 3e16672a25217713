"""Start a command contained: availability, the handshake with the stub, the supervisor.

For a runner that owns process creation (timeouts, process groups, output capture):

    launch = Launch.prepare(policy)           # never raises for "not available"
    launch.start_handshake()                  # optional: answer the launcher from a thread
    process = spawn(launch.wrap(argv), pass_fds=launch.pass_fds, ...)
    await launch.attach(process.pid)          # filter handed over, agent exec'd
    ... wait for the process group to end ...
    report = launch.finish()                  # containment tier, blocked, local, fs

(tests/egress/contained.py's `run_contained` does all of it for a plain command, for the
tests and the benchmark.)
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import platform
import select
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from flowproof_cli.egress import constants as c
from flowproof_cli.egress import rules
from flowproof_cli.egress.policy import Policy
from flowproof_cli.egress.report import Containment, EgressReport
from flowproof_cli.errors import AgentStartError, ContainmentError

if TYPE_CHECKING:
    from flowproof_cli.egress.supervisor import Supervisor

STUB = Path(__file__).with_name("_stub.py")
HANDSHAKE_TIMEOUT_S = 30.0
#: What to do about the one reason a user can fix with a package.
FIXES = {
    rules.LIBSECCOMP_MISSING: (
        "egress containment: install libseccomp to contain agents (Debian: "
        "`apt-get install libseccomp2`; scripts/bootstrap.sh does it when run as root)"
    )
}


def _capabilities() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


@functools.cache
def unavailable_reason() -> str | None:
    """Why this host cannot contain an agent, or None when it can."""
    if sys.platform != "linux":
        return "egress containment is Linux-only; this platform is not contained"
    machine = platform.machine()
    if machine not in ("x86_64", "AMD64"):
        return f"egress containment supports x86_64 only; this machine is {machine}"
    try:
        actions = Path("/proc/sys/kernel/seccomp/actions_avail").read_text()
    except OSError:
        return "the kernel has no seccomp filter support (no /proc/sys/kernel/seccomp)"
    if "user_notif" not in actions.split():
        return "the kernel lacks seccomp user notification (Linux >= 5.0 needed)"
    try:
        scope = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        scope = 0
    yama = yama_reason(scope, _capabilities())
    if yama is not None:
        return yama
    from flowproof_cli.egress import kernel  # noqa: PLC0415 (Linux-only ctypes)

    try:
        pidfd = os.pidfd_open(os.getpid())
        try:
            os.close(kernel.pidfd_getfd(pidfd, pidfd))
        finally:
            os.close(pidfd)
        kernel.read_memory(os.getpid(), id(actions), 1)
        kernel.notif_sizes()
    except OSError as exc:
        return f"the kernel refused a syscall the supervisor needs ({exc.strerror}; Linux >= 5.19)"
    return rules.unavailable_reason()


def refusal_reason(status: str) -> str:
    """Why the stub could not install the filter, from its `ERR <errno> <text>` line."""
    kind, _, rest = status.partition(" ")
    number_text, _, text = rest.partition(" ")
    if kind != "ERR" or not number_text.isdigit():
        return f"the agent's launcher failed ({status or 'no answer'})"
    number = int(number_text)
    if number == errno.EBUSY:
        return (
            "another seccomp user-notification sandbox already supervises this process tree "
            "(EBUSY): a nested sandbox cannot be supervised"
        )
    if number == errno.EINVAL:
        return "the kernel lacks SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux >= 5.19 needed)"
    return f"the kernel refused the seccomp filter ({text or os.strerror(number)})"


def yama_reason(scope: int, capabilities: int) -> str | None:
    """Pitfall 10: under Yama ptrace_scope 2 the supervisor needs CAP_SYS_PTRACE, under 3
    nothing may attach at all; report "not contained" rather than pretend."""
    if scope >= 3:
        return "Yama ptrace_scope is 3: the supervisor cannot read the agent's memory"
    if scope == 2 and not capabilities & (1 << c.DROPPED_CAPABILITIES["CAP_SYS_PTRACE"]):
        return (
            "Yama ptrace_scope is 2 and flowproof lacks CAP_SYS_PTRACE: the supervisor "
            "cannot read the agent's memory"
        )
    return None


def _supervisor_class() -> type[Supervisor]:
    """Imported only by a contained run (ctypes, the handlers: ~10 ms), and by the early
    handshake's thread before it waits, so the import overlaps the launcher's start."""
    from flowproof_cli.egress.supervisor import Supervisor  # noqa: PLC0415

    return Supervisor


@functools.cache
def _program_hex() -> str:
    return rules.program().hex()


def _read_line(fd: int, deadline: float) -> str:
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise ContainmentError("egress containment: the agent's launcher did not answer")
        chunk = os.read(fd, 256)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").strip()


class Launch:
    def __init__(self, policy: Policy, reason: str | None) -> None:
        self.policy = policy
        self.report = EgressReport(Containment(False, reason or "not started"))
        self.report.notes.extend(policy.notes)
        if reason in FIXES:
            self.report.notes.append(FIXES[reason])
        self._reason = reason
        self._supervisor: Supervisor | None = None
        self._fds: list[int] = []
        self.pass_fds: tuple[int, ...] = ()
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._finished = False
        self._early: threading.Thread | None = None  # start_handshake's thread
        self._early_failure: BaseException | None = None
        if reason is None:
            status_r, status_w = os.pipe2(os.O_CLOEXEC)
            ack_r, ack_w = os.pipe2(os.O_CLOEXEC)
            self._status_r, self._ack_w = status_r, ack_w
            self._child_fds = (status_w, ack_r)
            self._fds = [status_r, status_w, ack_r, ack_w]
            self.pass_fds = (status_w, ack_r)

    @classmethod
    def prepare(cls, policy: Policy | None = None, *, reason: str | None = None) -> Launch:
        """A launch that will contain the child when this host can, or pass it through with
        `reason` (given, or found by the availability check)."""
        reason = reason or unavailable_reason()
        if reason is None:
            from flowproof_cli.egress import kernel  # noqa: PLC0415 (Linux-only ctypes)

            # The agent runs as our uid: a dumpable supervisor would let it pidfd_getfd the
            # listener out of this process and answer its own notifications.
            kernel.prctl(c.PR_SET_DUMPABLE, 0)
        return cls(policy or Policy(), reason)

    @property
    def contained(self) -> bool:
        return self._reason is None

    def wrap(self, argv: list[str]) -> list[str]:
        self._program = argv[0] if argv else ""
        if not self.contained:
            return list(argv)
        drop = "1" if os.geteuid() == 0 or _capabilities() else "0"
        status_w, ack_r = self._child_fds
        return [
            sys.executable,
            "-I",
            "-S",
            str(STUB),
            str(status_w),
            str(ack_r),
            _program_hex(),
            drop,
            "--",
            *argv,
        ]

    def start_handshake(self) -> None:
        """Before the spawn: a thread of its own waits for the launcher's status and lets it
        exec the agent as soon as the filter is in place. Without it the handshake waits for
        `attach`, that is for this process's event loop, which may be busy loading the proxy
        engine beside the agent's start (measured: 0.2 s added to every contained flow)."""
        if not self.contained or self._early is not None:
            return

        def handshake() -> None:
            try:
                _supervisor_class()  # its imports (~10 ms) overlap the launcher's start
                self._handshake()
            except BaseException as exc:  # raised by attach, in the caller's thread
                self._early_failure = exc

        self._early = threading.Thread(target=handshake, name="flowproof-egress", daemon=True)
        self._early.start()

    def attach_sync(self, pid: int) -> None:
        """Take the listener from the child, start the supervisor, let the child exec
        (or wait for `start_handshake`'s thread to have done so), then see the exec through.

        Holds the launch's lock throughout, so a `finish` racing with it (a cancelled flow
        whose process group was just killed) waits for it instead of closing its pipes."""
        with self._lock:
            if self.contained and not self._finished:
                self._drop_child_ends()
                if self._early is None:
                    self._handshake()
                else:
                    self._early.join()
                    if self._early_failure is not None:
                        raise self._early_failure
                self._exec_result()

    def _drop_child_ends(self) -> None:
        """Close this process's copies of the launcher's pipe ends: its exit (or a spawn
        that never happened) is then an end of file, which also ends an early handshake."""
        for fd in self._child_fds:
            self._close(fd)

    def _ack(self, answer: bytes) -> None:
        with contextlib.suppress(BrokenPipeError):  # the child died: its exit is the news
            os.write(self._ack_w, answer)

    def _handshake(self) -> None:
        """The launcher's status: its listener taken and the supervisor started (or the
        reason it cannot be contained), then the go-ahead to exec."""
        self.started = time.monotonic()
        status = _read_line(self._status_r, self.started + HANDSHAKE_TIMEOUT_S)
        kind, _, rest = status.partition(" ")
        if not status:
            raise AgentStartError(
                "cannot start the agent: flowproof's launcher exited before starting it"
            )
        if kind == "OK":
            child, listener_number, dropped = rest.split()
            self._take_listener(int(child), int(listener_number))
            if dropped != "-":
                self.report.notes.append(
                    "egress containment: the agent ran without "
                    + ", ".join(dropped.split(","))
                    + " (they reach the network or the supervisor outside the filter)"
                )
        else:
            self.report.containment = Containment(False, refusal_reason(status))
            self._ack(b"G")

    def _exec_result(self) -> None:
        """After the go-ahead: an end of file is a successful exec, `EXEC n` a failed one."""
        result = _read_line(self._status_r, time.monotonic() + HANDSHAKE_TIMEOUT_S)
        if result.startswith("EXEC "):
            number = int(result.split()[1])
            program = getattr(self, "_program", "")
            if number == errno.ENOENT:
                raise AgentStartError(f"cannot start the agent: {program!r} was not found")
            if number == errno.EACCES:
                raise AgentStartError(f"cannot start the agent: {program!r} is not executable")
            raise AgentStartError(f"cannot start the agent {program!r}: {os.strerror(number)}")

    def _take_listener(self, pid: int, number: int) -> None:
        from flowproof_cli.egress import kernel  # noqa: PLC0415 (Linux-only ctypes)

        try:
            pidfd = os.pidfd_open(pid)
            try:
                listener = kernel.pidfd_getfd(pidfd, number)
            finally:
                os.close(pidfd)
        except OSError as exc:
            self._ack(b"X")  # the filter is installed: never run it orphaned
            raise ContainmentError(
                f"egress containment: cannot take the filter's listener from the agent "
                f"({exc.strerror})"
            ) from exc
        self._supervisor = _supervisor_class()(listener, self.policy, self.report, self.started)
        self._supervisor.start()
        self.report.containment = Containment(True)
        self._ack(b"G")

    async def attach(self, pid: int) -> None:
        await asyncio.to_thread(self.attach_sync, pid)

    def finish(self) -> EgressReport:
        """Stop the supervisor (call once the agent's process group has ended)."""
        with self._lock:
            self._finished = True
            if self._early is not None:  # a spawn that failed, a flow cancelled before attach
                self._drop_child_ends()
                self._early.join(HANDSHAKE_TIMEOUT_S)
            if self._supervisor is not None:
                self._supervisor.stop()
                self._supervisor = None
            for fd in list(self._fds):
                self._close(fd)
        return self.report

    def _close(self, fd: int) -> None:
        if fd in self._fds:
            self._fds.remove(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
