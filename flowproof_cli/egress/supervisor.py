"""The supervisor: answers every trapped syscall of a contained agent.

One receiver thread polls the listener and decides; a worker pool performs allowed calls
that may block (a blocking connect must not stall every other thread of the agent).

The rules it keeps (see docs/egress.md and ../shared/notes/seccomp.md):
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
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from flowproof_cli.egress import constants as c
from flowproof_cli.egress import kernel
from flowproof_cli.egress.kernel import Listener, Notification
from flowproof_cli.egress.policy import Policy, Verdict
from flowproof_cli.egress.report import Blocked, EgressReport, FsEvent
from flowproof_cli.egress.sockaddr import MAX_ADDRLEN, Malformed, SockAddr, parse

log = logging.getLogger(__name__)

MAX_PAYLOAD = 1 << 20  # bytes of one emulated send; a stream send beyond it is partial
MAX_CONTROL = 1 << 17
UIO_MAXIOV = 1024
MSGHDR = struct.Struct("<QI4xQQQQi4x")  # struct msghdr
MMSGHDR_SIZE = 64
MAX_WORKERS = 32
_PROTOCOLS = {0: "ip", 1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6", 136: "udplite"}
_SOCK_TYPES = {1: "stream", 2: "dgram", 5: "seqpacket"}
_FS_NUMBERS = frozenset(c.NR[name] for name in c.FS_TRAPS)
_NR_SENDTO = c.NR["sendto"]


class _Unreadable(Exception):
    """The agent's memory could not be read for a reason other than a bad pointer."""


@dataclass
class _Message:
    name: bytes | None
    data: bytes
    control: bytes


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
        self.handlers: dict[int, Callable[[Notification], None]] = {
            c.NR["connect"]: self._connect,
            c.NR["sendto"]: self._sendto,
            c.NR["sendmsg"]: self._sendmsg,
            c.NR["sendmmsg"]: self._sendmmsg,
            c.NR["listen"]: self._listen,
        }
        for number in _FS_NUMBERS:
            self.handlers[number] = self._filesystem

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
                self._deny_errno(n, errno.ENOSYS)
            else:
                handler(n)
        except Exception as exc:
            log.exception("egress supervisor: handling %s failed", c.NAME_OF.get(n.nr, n.nr))
            if n.nr in _FS_NUMBERS:
                self.listener.respond(n.id, cont=True)
            else:
                self.report.notes.append(f"egress supervisor fault ({exc!r}); the call was refused")
                self._deny_errno(n, errno.EPERM)

    # --- helpers ----------------------------------------------------------------------------

    def now_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def _deny_errno(self, n: Notification, error: int) -> None:
        self.listener.respond(n.id, error=error)

    def _read(self, n: Notification, address: int, length: int) -> bytes:
        """Copy agent memory; EFAULT passes through as the kernel's own answer."""
        try:
            return kernel.read_memory(n.pid, address, length)
        except OSError as exc:
            if exc.errno == errno.EFAULT:
                raise
            raise _Unreadable(exc.strerror or str(exc)) from exc

    def _duplicate(self, n: Notification, fd: int) -> int:
        """The agent's descriptor, duplicated through the calling thread's own pidfd."""
        pidfd = kernel.open_thread_pidfd(n.pid)
        try:
            if not self.listener.id_valid(n.id):
                raise OSError(errno.ESRCH, "caller gone")
            return kernel.pidfd_getfd(pidfd, fd)
        finally:
            os.close(pidfd)

    def _protocol(self, fd: int | None) -> str:
        if fd is None:
            return "unknown"
        try:
            domain = kernel.getsockopt_int(fd, kernel.SOL_SOCKET, kernel.SO_DOMAIN)
            if domain == c.AF_UNIX:
                kind = kernel.getsockopt_int(fd, kernel.SOL_SOCKET, kernel.SO_TYPE)
                return f"unix-{_SOCK_TYPES.get(kind, kind)}"
            number = kernel.getsockopt_int(fd, kernel.SOL_SOCKET, kernel.SO_PROTOCOL)
        except OSError:
            return "unknown"
        return _PROTOCOLS.get(number, f"proto-{number}")

    def _block(self, n: Notification, fd: int, destination: str, error: int) -> None:
        """Refuse and record; the protocol is read from the agent's socket when possible."""
        dup: int | None = None
        with contextlib.suppress(OSError):
            dup = self._duplicate(n, fd)
        try:
            protocol = self._protocol(dup)
        finally:
            if dup is not None:
                os.close(dup)
        syscall = c.NAME_OF.get(n.nr, str(n.nr))
        self.report.add_blocked(Blocked(destination, protocol, self.now_ms(), syscall))
        self.listener.respond(n.id, error=error)

    def _fail_closed(self, n: Notification, fd: int, why: str) -> None:
        """The agent's memory is unreadable (e.g. it exec'd an unreadable binary and became
        non-dumpable): the destination is unknown, so the call is refused and recorded."""
        self._block(n, fd, f"unknown (agent memory unreadable: {why})", c.DENY_CONNECT)

    def _read_sockaddr(self, n: Notification, pointer: int, length: int) -> bytes | int:
        """The copied sockaddr, or the errno the kernel itself would answer; _Unreadable
        when the agent's memory cannot be read at all (the caller fails closed)."""
        if length > MAX_ADDRLEN or length < 0:
            return errno.EINVAL
        if pointer == 0:
            return errno.EFAULT if length else errno.EINVAL
        try:
            return self._read(n, pointer, length)
        except OSError:
            return errno.EFAULT

    def _note_local(self, address: SockAddr, fd: int) -> None:
        if address.family == c.AF_UNIX:
            self.report.add_local(f"unix {address.describe()}")
        elif address.ip is not None:  # an IP sockaddr: the socket is inet, one lookup is enough
            try:
                number = kernel.getsockopt_int(fd, kernel.SOL_SOCKET, kernel.SO_PROTOCOL)
            except OSError:
                number = -1
            protocol = _PROTOCOLS.get(number, f"proto-{number}")
            self.report.add_local(f"{protocol} {address.describe()}")

    def _perform(
        self,
        n: Notification,
        fd: int,
        action: Callable[[int], tuple[int, int]],
        *,
        local: bool = False,
    ) -> None:
        """Run `action(dup)` -> (value, errno) on a duplicate of the agent's socket and answer
        with its result. A blocking call to an off-host peer goes to the pool (its connect
        may wait for a peer that never answers); a non-blocking socket, or a connect to a
        local listener (answered by this kernel at once), runs here, saving a thread handoff
        on the hot path. A sibling that flips the flag in between, or a local listener whose
        backlog is full, only delays this agent's other calls; it cannot change a decision."""
        try:
            dup = self._duplicate(n, fd)
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

        try:
            blocking = not fcntl.fcntl(dup, fcntl.F_GETFL) & os.O_NONBLOCK
        except OSError:
            blocking = True
        if blocking and not local:
            self._pool.submit(job)
        else:
            job()

    # --- network ----------------------------------------------------------------------------

    def _classify(self, address: SockAddr) -> Verdict:
        if address.ip is not None:
            return self.policy.decide(address.ip, address.port)
        return Verdict.LOCAL  # unix, netlink, AF_UNSPEC (disconnect): nothing leaves

    def _sending_address(self, raw: bytes) -> SockAddr:
        """A send's destination. UDP over IPv4 reads an AF_UNSPEC sockaddr as AF_INET (BSD
        compatibility), so for a send it is decided as the IPv4 address it carries."""
        address = parse(raw)
        if address.family == c.AF_UNSPEC and len(raw) >= 16:
            return parse(struct.pack("<H", c.AF_INET) + raw[2:])
        return address

    def _connect(self, n: Notification) -> None:
        fd, pointer, length = n.arg_int(0), n.args[1], n.arg_int(2)
        try:
            raw = self._read_sockaddr(n, pointer, length)
        except _Unreadable as exc:
            return self._fail_closed(n, fd, str(exc))
        if isinstance(raw, int):
            return self._deny_errno(n, raw) if self.listener.id_valid(n.id) else None
        if not self.listener.id_valid(n.id):
            return None
        try:
            address = parse(raw)
        except Malformed:
            return self._deny_errno(n, errno.EINVAL)
        verdict = self._classify(address)
        if verdict is Verdict.DENIED:
            return self._block(n, fd, address.describe(), c.DENY_CONNECT)
        target = raw
        if address.family == c.AF_UNIX and address.path and address.path[0] not in "/@":
            return self._connect_relative_unix(n, fd, address)

        def action(dup: int) -> tuple[int, int]:
            if verdict is Verdict.LOCAL:
                self._note_local(address, dup)
            return 0, kernel.connect(dup, target)

        return self._perform(n, fd, action, local=verdict is Verdict.LOCAL)

    def _connect_relative_unix(self, n: Notification, fd: int, address: SockAddr) -> None:
        """A relative unix path is the agent's, not ours: reach it through its cwd."""
        path = address.path or ""

        def action(dup: int) -> tuple[int, int]:
            self.report.add_local(f"unix {path}")
            try:
                cwd = os.open(f"/proc/{n.pid}/cwd", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                return -1, exc.errno or errno.ENOENT
            try:
                via = f"/proc/self/fd/{cwd}/{path}".encode()
                if len(via) > 107:
                    return -1, errno.ENAMETOOLONG
                return 0, kernel.connect(dup, struct.pack("<H", c.AF_UNIX) + via + b"\0")
            finally:
                os.close(cwd)

        self._perform(n, fd, action)

    def _listen(self, n: Notification) -> None:
        fd, backlog = n.arg_int(0), n.arg_int(1)
        try:
            dup = self._duplicate(n, fd)
        except OSError as exc:
            self.listener.respond(n.id, error=exc.errno or errno.EBADF)
            return
        try:
            try:
                bound = parse(kernel.getsockname(dup))
            except (OSError, Malformed):
                bound = SockAddr(c.AF_UNSPEC)
            if bound.ip is not None and not bound.ip.is_loopback:
                protocol = self._protocol(dup)
                self.report.add_blocked(
                    Blocked(bound.describe(), protocol, self.now_ms(), "listen")
                )
                self.listener.respond(n.id, error=c.DENY_LISTEN)
                return
            self.listener.respond(n.id, error=kernel.listen(dup, backlog))
        finally:
            os.close(dup)

    def _sendto(self, n: Notification) -> None:
        fd, buffer, length, flags = n.arg_int(0), n.args[1], n.args[2], n.arg_int(3)
        try:
            raw = self._read_sockaddr(n, n.args[4], n.arg_int(5))
        except _Unreadable as exc:
            return self._fail_closed(n, fd, str(exc))
        if isinstance(raw, int):
            return self._deny_errno(n, raw) if self.listener.id_valid(n.id) else None
        try:
            data = self._read(n, buffer, min(length, MAX_PAYLOAD)) if buffer else b""
        except OSError:
            data = None
        except _Unreadable as exc:
            return self._fail_closed(n, fd, str(exc))
        if not self.listener.id_valid(n.id):
            return None
        try:
            address = self._sending_address(raw)
        except Malformed:
            return self._deny_errno(n, errno.EINVAL)
        if data is None:
            return self._deny_errno(n, errno.EFAULT)
        message = _Message(raw, data, b"")
        return self._send(n, fd, [(address, message)], flags, truncated=length > MAX_PAYLOAD)

    def _read_msghdr(self, n: Notification, pointer: int) -> tuple[SockAddr | None, _Message]:
        """One struct msghdr and everything it points to; raises OSError(errno) or _Unreadable."""
        name_ptr, namelen, iov_ptr, iovlen, control_ptr, controllen, _ = MSGHDR.unpack(
            self._read(n, pointer, MSGHDR.size)
        )
        name: bytes | None = None
        address: SockAddr | None = None
        if name_ptr and namelen:
            name = self._read(n, name_ptr, min(namelen, MAX_ADDRLEN))
            try:
                address = self._sending_address(name)
            except Malformed as exc:
                raise OSError(errno.EINVAL, "short sockaddr") from exc
        if iovlen > UIO_MAXIOV:
            raise OSError(errno.EMSGSIZE, "too many iovecs")
        chunks: list[bytes] = []
        total = 0
        if iovlen:
            vectors = self._read(n, iov_ptr, 16 * iovlen)
            for index in range(iovlen):
                base, size = struct.unpack_from("<QQ", vectors, 16 * index)
                take = min(size, MAX_PAYLOAD - total)
                if take:
                    chunks.append(self._read(n, base, take))
                    total += take
        control = b""
        if control_ptr and controllen:
            if controllen > MAX_CONTROL:
                raise OSError(errno.ENOBUFS, "control data too large")
            control = self._read(n, control_ptr, controllen)
        return address, _Message(name, b"".join(chunks), control)

    def _sendmsg(self, n: Notification) -> None:
        fd, pointer, flags = n.arg_int(0), n.args[1], n.arg_int(2)
        try:
            address, message = self._read_msghdr(n, pointer)
        except _Unreadable as exc:
            return self._fail_closed(n, fd, str(exc))
        except OSError as exc:
            return (
                self._deny_errno(n, exc.errno or errno.EFAULT)
                if self.listener.id_valid(n.id)
                else None
            )
        if not self.listener.id_valid(n.id):
            return None
        return self._send(n, fd, [(address, message)], flags, truncated=False)

    def _sendmmsg(self, n: Notification) -> None:
        fd, pointer, count, flags = n.arg_int(0), n.args[1], n.args[2] & 0xFFFFFFFF, n.arg_int(3)
        count = min(count, UIO_MAXIOV)
        messages: list[tuple[SockAddr | None, _Message]] = []
        try:
            for index in range(count):
                messages.append(self._read_msghdr(n, pointer + MMSGHDR_SIZE * index))
        except _Unreadable as exc:
            return self._fail_closed(n, fd, str(exc))
        except OSError as exc:
            if not messages:
                return self._deny_errno(n, exc.errno or errno.EFAULT)
        if not self.listener.id_valid(n.id):
            return None
        return self._send(n, fd, messages, flags, truncated=False, vector=pointer)

    def _send(
        self,
        n: Notification,
        fd: int,
        messages: list[tuple[SockAddr | None, _Message]],
        flags: int,
        *,
        truncated: bool,
        vector: int | None = None,
    ) -> None:
        """Decide every destination first; refuse the whole call if one is refused."""
        verdicts = []
        for address, _ in messages:
            verdict = Verdict.LOCAL if address is None else self._classify(address)
            if verdict is Verdict.DENIED and address is not None:
                return self._block(n, fd, address.describe(), c.DENY_SEND)
            verdicts.append(verdict)

        def action(dup: int) -> tuple[int, int]:
            kind = kernel.getsockopt_int(dup, kernel.SOL_SOCKET, kernel.SO_TYPE)
            for (address, _), verdict in zip(messages, verdicts, strict=True):
                if verdict is Verdict.ALLOWED and address is not None and kind != c.SOCK_STREAM:
                    # Off-host unconnected datagrams are refused, not vetted (connect first).
                    self.report.add_blocked(
                        Blocked(
                            address.describe(),
                            self._protocol(dup),
                            self.now_ms(),
                            c.NAME_OF.get(n.nr, "send"),
                        )
                    )
                    return -1, c.DENY_SEND
                if verdict is Verdict.LOCAL and address is not None:
                    self._note_local(address, dup)
            if truncated and kind != c.SOCK_STREAM:
                return -1, errno.EMSGSIZE
            sent_count = 0
            for index, (_, message) in enumerate(messages):
                value, error = self._send_one(n, dup, message, flags)
                if error:
                    return (sent_count, 0) if sent_count else (-1, error)
                if vector is None:
                    return value, 0
                with contextlib.suppress(OSError):
                    if self.listener.id_valid(n.id):
                        kernel.write_memory(
                            n.pid, vector + MMSGHDR_SIZE * index + 56, struct.pack("<I", value)
                        )
                sent_count += 1
            return sent_count, 0

        self._perform(n, fd, action)

    def _send_one(
        self, n: Notification, dup: int, message: _Message, flags: int
    ) -> tuple[int, int]:
        control, passed = self._translate_rights(n, message.control)
        try:
            if n.nr == _NR_SENDTO:
                return kernel.sendto(dup, message.data, flags, message.name or b"")
            return kernel.sendmsg(dup, message.name, message.data, control, flags)
        finally:
            for fd in passed:
                os.close(fd)

    def _translate_rights(self, n: Notification, control: bytes) -> tuple[bytes, list[int]]:
        """SCM_RIGHTS carries the agent's descriptor numbers: pass our duplicates instead."""
        if not control:
            return control, []
        out = bytearray(control)
        passed: list[int] = []
        offset = 0
        while offset + 16 <= len(control):
            length, level, kind = struct.unpack_from("<Qii", control, offset)
            if length < 16 or offset + length > len(control):
                break
            if level == kernel.SOL_SOCKET and kind == 1:  # SCM_RIGHTS
                for position in range(offset + 16, offset + length - 3, 4):
                    (agent_fd,) = struct.unpack_from("<i", control, position)
                    dup = self._duplicate(n, agent_fd)
                    passed.append(dup)
                    struct.pack_into("<i", out, position, dup)
            offset += (length + 7) & ~7
        return bytes(out), passed

    # --- filesystem observation -------------------------------------------------------------

    def _path(self, n: Notification, pointer: int, dirfd: int = c.AT_FDCWD) -> str:
        try:
            path = kernel.read_string(n.pid, pointer).decode("utf-8", "replace")
        except OSError:
            return "unresolved"
        if path.startswith("/"):
            return path
        try:
            base = os.readlink(
                f"/proc/{n.pid}/cwd" if dirfd == c.AT_FDCWD else f"/proc/{n.pid}/fd/{dirfd}"
            )
        except OSError:
            return path
        return os.path.join(base, path) if path else base

    def _filesystem(self, n: Notification) -> None:
        name = c.NAME_OF[n.nr]
        detail: str | None
        try:
            detail = self._describe_fs(n, name)
        finally:
            # Observation only: the syscall runs whatever was read.
            self.listener.respond(n.id, cont=True)
        if detail is not None:
            self.report.add_fs(FsEvent(name, detail, self.now_ms()))

    def _describe_fs(self, n: Notification, name: str) -> str | None:
        a = n.args
        if name in ("unlink", "rmdir", "truncate"):
            return self._path(n, a[0])
        if name == "creat":
            return f"[{open_flags(0o1101)}] {self._path(n, a[0])}"
        if name == "unlinkat":
            flag = " [AT_REMOVEDIR]" if n.arg_int(2) & c.AT_REMOVEDIR else ""
            return f"{self._path(n, a[1], n.arg_int(0))}{flag}"
        if name == "ftruncate":
            try:
                return os.readlink(f"/proc/{n.pid}/fd/{n.arg_int(0)}")
            except OSError:
                return "unresolved"
        if name == "rename":
            return f"{self._path(n, a[0])} -> {self._path(n, a[1])}"
        if name in ("renameat", "renameat2"):
            old = self._path(n, a[1], n.arg_int(0))
            return f"{old} -> {self._path(n, a[3], n.arg_int(2))}"
        if name == "open":
            return f"[{open_flags(n.arg_int(1))}] {self._path(n, a[0])}"
        if name == "openat":
            return f"[{open_flags(n.arg_int(2))}] {self._path(n, a[1], n.arg_int(0))}"
        if name == "openat2":
            if a[3] < 8:
                return None  # the kernel refuses a short open_how itself
            try:
                (flags,) = struct.unpack("<Q", kernel.read_memory(n.pid, a[2], 8))
            except OSError:
                path = self._path(n, a[1], n.arg_int(0))
                self.report.add_fs_fault(
                    f"openat2 {path}: open_how unreadable at {self.now_ms()}ms"
                )
                return None
            if not flags & c.O_TRUNC:
                return None  # an ordinary open through openat2
            return f"[{open_flags(flags)}] {self._path(n, a[1], n.arg_int(0))}"
        return "unresolved"


def open_flags(flags: int) -> str:
    """O_WRONLY|O_CREAT|O_TRUNC, as a report prints it."""
    names = [("O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE")[flags & c.O_ACCMODE]]
    names.extend(name for bit, name in c.OPEN_FLAG_NAMES if flags & bit)
    return "|".join(names)
