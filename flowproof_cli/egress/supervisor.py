"""The supervisor: answers every trapped syscall of a contained agent.

One receiver thread polls the listener and dispatches each notification through a table
of handlers (network.py registers the network calls, filesystem.py the observed ones); a
worker pool performs allowed calls that may block (a blocking connect must not stall every
other thread of the agent).

The rules it keeps (see docs/egress.md):
- decide on a COPY of the agent's memory (process_vm_readv), and check ID_VALID after the
  copy, so the pid the copy came from was still the caller;
- never answer CONTINUE for a network call: an allowed call is performed here, on a
  pidfd_getfd duplicate of the agent's socket, with the copied address, and its result
  (EINPROGRESS included) is the answer. The kernel never re-reads what a sibling thread may
  have rewritten;
- fail closed: when the agent's memory cannot be read the call is refused and reported;
- filesystem traps are observed and answered CONTINUE: nothing is prevented.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import queue
import select
import threading
import time
from collections.abc import Callable

from flowproof_cli.egress import constants as c
from flowproof_cli.egress import kernel
from flowproof_cli.egress.filesystem import FsObserver
from flowproof_cli.egress.handlers import Action, Handler
from flowproof_cli.egress.kernel import Listener, Notification
from flowproof_cli.egress.msghdr import Unreadable
from flowproof_cli.egress.network import Network
from flowproof_cli.egress.policy import Policy
from flowproof_cli.egress.report import EgressReport

log = logging.getLogger(__name__)

MAX_WORKERS = 32


class _Pool:
    """Daemon worker threads, spawned on demand; a job never waits for a busy worker."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._idle = 0
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle == 0 and len(self._threads) < MAX_WORKERS:
                thread = threading.Thread(target=self._work, name="flowproof-egress", daemon=True)
                self._threads.append(thread)
                thread.start()
            else:
                self._idle -= 1
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # a job answers its own notification; never kill the worker
                log.exception("egress supervisor job failed")
            with self._lock:
                self._idle += 1

    def stop(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)


class Supervisor:
    def __init__(self, listener_fd: int, policy: Policy, report: EgressReport, started: float):
        self.listener = Listener(listener_fd)
        self.policy = policy
        self.report = report
        self.started = started
        self._pool = _Pool()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(
            target=self._loop, name="flowproof-egress-recv", daemon=True
        )
        self._inflight: set[int] = set()
        self._inflight_lock = threading.Lock()
        self._drained = threading.Condition(self._inflight_lock)
        self._closed = False
        self.handlers: dict[int, Handler] = {}
        self._observed: set[int] = set()  # answered CONTINUE, even when their handler fails
        Network(self)
        FsObserver(self)

    def register(self, number: int, handler: Handler, *, observe_only: bool = False) -> None:
        """Route the syscall `number` to `handler`; an `observe_only` call is let through
        (CONTINUE) if its handler fails, any other is refused."""
        self.handlers[number] = handler
        if observe_only:
            self._observed.add(number)

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop answering; tasks still holding the filter then get ENOSYS (fail closed)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._thread.join(timeout)
        with self._drained:
            for fd in self._inflight:  # unblock a connect still waiting for its peer
                kernel.shutdown(fd)
            drained = self._drained.wait_for(lambda: not self._inflight, timeout)
        self._pool.stop()
        if drained and not self._thread.is_alive():
            # Only now: a job answering later must never reach a reused descriptor number.
            os.close(self.listener.fd)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _loop(self) -> None:
        poller = select.poll()
        poller.register(self.listener.fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            for fd, events in poller.poll():
                if fd == self._wake_r:
                    return
                if events & select.POLLIN:
                    try:
                        notification = self.listener.receive()
                    except OSError as exc:
                        if exc.errno in (errno.ENOENT, errno.EINTR):
                            continue  # the caller was killed between poll and receive
                        log.error("egress supervisor: receive failed: %s", exc)
                        return
                    self._dispatch(notification)
                elif events & (select.POLLHUP | select.POLLERR):
                    return  # no task uses the filter any more

    def _dispatch(self, n: Notification) -> None:
        handler = self.handlers.get(n.nr)
        try:
            if handler is None:
                self.deny(n, errno.ENOSYS)
            else:
                handler(n)
        except Exception as exc:
            log.exception("egress supervisor: handling %s failed", c.NAME_OF.get(n.nr, n.nr))
            if n.nr in self._observed:
                self.listener.respond(n.id, cont=True)
            else:
                self.report.notes.append(f"egress supervisor fault ({exc!r}); the call was refused")
                self.deny(n, errno.EPERM)

    # --- what every handler uses ------------------------------------------------------------

    def now_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def deny(self, n: Notification, error: int) -> None:
        self.listener.respond(n.id, error=error)

    def read(self, n: Notification, address: int, length: int) -> bytes:
        """Copy agent memory; EFAULT passes through as the kernel's own answer."""
        try:
            return kernel.read_memory(n.pid, address, length)
        except OSError as exc:
            if exc.errno == errno.EFAULT:
                raise
            raise Unreadable(exc.strerror or str(exc)) from exc

    def duplicate(self, n: Notification, fd: int) -> int:
        """The agent's descriptor, duplicated through the calling thread's own pidfd."""
        pidfd = kernel.open_thread_pidfd(n.pid)
        try:
            if not self.listener.id_valid(n.id):
                raise OSError(errno.ESRCH, "caller gone")
            return kernel.pidfd_getfd(pidfd, fd)
        finally:
            os.close(pidfd)

    def perform(self, n: Notification, fd: int, action: Action, *, local: bool = False) -> None:
        """Run `action(dup)` -> (value, errno) on a duplicate of the agent's socket and answer
        with its result. A blocking call to an off-host peer goes to the pool (its connect
        may wait for a peer that never answers); a non-blocking socket, or a connect to a
        local listener (answered by this kernel at once), runs here, saving a thread handoff
        on the hot path. A sibling that flips the flag in between, or a local listener whose
        backlog is full, only delays this agent's other calls; it cannot change a decision."""
        try:
            dup = self.duplicate(n, fd)
        except OSError as exc:
            self.listener.respond(n.id, error=exc.errno or errno.EBADF)
            return

        with self._inflight_lock:
            self._inflight.add(dup)

        def job() -> None:
            value, error = -1, errno.EPERM  # fail closed
            try:
                value, error = action(dup)
            except Exception:
                log.exception("egress supervisor: performing a call failed")
            finally:
                # Answer before leaving the in-flight set: the listener is closed only once
                # the set is empty, so no answer can reach a reused descriptor number.
                self.listener.respond(n.id, value=value, error=error)
                with self._drained:
                    self._inflight.discard(dup)
                    os.close(dup)
                    self._drained.notify_all()

        if _blocking(dup) and not local:
            self._pool.submit(job)
        else:
            job()


def _blocking(fd: int) -> bool:
    try:
        return not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
    except OSError:
        return True
