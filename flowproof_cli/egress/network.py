"""The network handlers: connect, listen and the sends, decided against the policy.

An allowed call is performed by the supervisor on a duplicate of the agent's socket, with
the address copied out of the agent's memory (never CONTINUE: the kernel would re-read what
a sibling thread may have rewritten). A refused one is answered with an errno and recorded.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
from collections.abc import Callable

from flowproof_cli.egress import constants as c
from flowproof_cli.egress import kernel
from flowproof_cli.egress.handlers import Host
from flowproof_cli.egress.kernel import Notification
from flowproof_cli.egress.lookups import Lookups, asked, is_resolver
from flowproof_cli.egress.msghdr import (
    MAX_PAYLOAD,
    MMSGHDR_SIZE,
    UIO_MAXIOV,
    Message,
    Unreadable,
    foreign_interface,
    msg_len_address,
    read_msghdr,
    sending_address,
    translate_rights,
)
from flowproof_cli.egress.policy import Verdict
from flowproof_cli.egress.report import Blocked
from flowproof_cli.egress.sockaddr import MAX_ADDRLEN, Malformed, SockAddr, parse

_PROTOCOLS = {0: "ip", 1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6", 136: "udplite"}
_SOCK_TYPES = {1: "stream", 2: "dgram", 5: "seqpacket"}
_NR_SENDTO = c.NR["sendto"]

Addressed = tuple[SockAddr | None, Message]  # one message of a send, and where it goes


def socket_protocol(fd: int | None) -> str:
    """`tcp`, `udp`, `unix-stream`...: what a report names a socket by."""
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


class Network:
    """Registers connect, sendto, sendmsg, sendmmsg and listen into a supervisor."""

    def __init__(self, supervisor: Host) -> None:
        self.supervisor = supervisor
        self.lookups = Lookups(supervisor, self._block, socket_protocol)
        supervisor.register(c.NR["connect"], self.connect)
        supervisor.register(c.NR["sendto"], self.sendto)
        supervisor.register(c.NR["sendmsg"], self.sendmsg)
        supervisor.register(c.NR["sendmmsg"], self.sendmmsg)
        supervisor.register(c.NR["listen"], self.listen)

    # --- deciding and refusing ----------------------------------------------------------------

    def _classify(self, address: SockAddr) -> Verdict:
        if address.ip is not None:
            return self.supervisor.policy.decide(address.ip, address.port)
        return Verdict.LOCAL  # unix, netlink, AF_UNSPEC (disconnect): nothing leaves

    def _block(
        self, n: Notification, fd: int, destination: str, error: int, query: str | None = None
    ) -> None:
        """Refuse and record (with the DNS `query` it carried, if any); the protocol is read
        from the agent's socket when possible."""
        dup: int | None = None
        with contextlib.suppress(OSError):
            dup = self.supervisor.duplicate(n, fd)
        try:
            protocol = socket_protocol(dup)
        finally:
            if dup is not None:
                os.close(dup)
        syscall = c.NAME_OF.get(n.nr, str(n.nr))
        blocked = Blocked(destination, protocol, self.supervisor.now_ms(), syscall)
        if query is not None:
            self.supervisor.report.add_query(blocked, query)
        self.supervisor.report.add_blocked(blocked)
        self.supervisor.listener.respond(n.id, error=error)

    def _fail_closed(self, n: Notification, fd: int, why: str) -> None:
        """The agent's memory is unreadable (e.g. it exec'd an unreadable binary and became
        non-dumpable): the destination is unknown, so the call is refused and recorded."""
        self._block(n, fd, f"unknown (agent memory unreadable: {why})", c.DENY_CONNECT)

    def _deny_if_valid(self, n: Notification, error: int) -> None:
        """Answer `error`, unless the caller is gone (its copy may not have been its own)."""
        if self.supervisor.listener.id_valid(n.id):
            self.supervisor.deny(n, error)

    def _read_sockaddr(self, n: Notification, pointer: int, length: int) -> bytes | int:
        """The copied sockaddr, or the errno the kernel itself would answer; Unreadable
        when the agent's memory cannot be read at all (the caller fails closed)."""
        if length > MAX_ADDRLEN or length < 0:
            return errno.EINVAL
        if pointer == 0:
            return errno.EFAULT if length else errno.EINVAL
        try:
            return self.supervisor.read(n, pointer, length)
        except OSError:
            return errno.EFAULT

    def _copied_sockaddr(self, n: Notification, fd: int, pointer: int, length: int) -> bytes | None:
        """The copied sockaddr; None once the call is answered (an errno, or fail closed)."""
        try:
            raw = self._read_sockaddr(n, pointer, length)
        except Unreadable as exc:
            self._fail_closed(n, fd, str(exc))
            return None
        if isinstance(raw, int):
            self._deny_if_valid(n, raw)
            return None
        return raw

    def _parsed(
        self, n: Notification, raw: bytes, parser: Callable[[bytes], SockAddr]
    ) -> SockAddr | None:
        """The sockaddr read as the kernel reads it; None once a malformed one got EINVAL."""
        try:
            return parser(raw)
        except Malformed:
            self.supervisor.deny(n, errno.EINVAL)
            return None

    def _note_local(self, address: SockAddr, fd: int) -> None:
        if address.family == c.AF_UNIX:
            self.supervisor.report.add_local(f"unix {address.describe()}")
        elif address.ip is not None:  # an IP sockaddr: the socket is inet, one lookup is enough
            try:
                number = kernel.getsockopt_int(fd, kernel.SOL_SOCKET, kernel.SO_PROTOCOL)
            except OSError:
                number = -1
            protocol = _PROTOCOLS.get(number, f"proto-{number}")
            self.supervisor.report.add_local(f"{protocol} {address.describe()}")

    # --- connect and listen -------------------------------------------------------------------

    def connect(self, n: Notification) -> None:
        fd = n.arg_int(0)
        raw = self._copied_sockaddr(n, fd, n.args[1], n.arg_int(2))
        if raw is None or not self.supervisor.listener.id_valid(n.id):
            return None
        address = self._parsed(n, raw, parse)
        if address is None:
            return None
        verdict = self._classify(address)
        if verdict is Verdict.DENIED and is_resolver(address):
            return self.lookups.connect(n, fd, address)
        if verdict is Verdict.DENIED:
            return self._block(n, fd, address.describe(), c.DENY_CONNECT)
        if address.family == c.AF_UNIX and address.path and address.path[0] not in "/@":
            return _connect_relative_unix(self.supervisor, n, fd, address.path)

        def action(dup: int) -> tuple[int, int]:
            if verdict is Verdict.LOCAL:
                self._note_local(address, dup)
            return 0, kernel.connect(dup, raw)

        return self.supervisor.perform(n, fd, action, local=verdict is Verdict.LOCAL)

    def listen(self, n: Notification) -> None:
        fd, backlog = n.arg_int(0), n.arg_int(1)
        try:
            dup = self.supervisor.duplicate(n, fd)
        except OSError as exc:
            self.supervisor.listener.respond(n.id, error=exc.errno or errno.EBADF)
            return
        try:
            try:
                bound = parse(kernel.getsockname(dup))
            except (OSError, Malformed):
                bound = SockAddr(c.AF_UNSPEC)
            if bound.ip is not None and not bound.ip.is_loopback:
                blocked = Blocked(
                    bound.describe(), socket_protocol(dup), self.supervisor.now_ms(), "listen"
                )
                self.supervisor.report.add_blocked(blocked)
                self.supervisor.listener.respond(n.id, error=c.DENY_LISTEN)
                return
            self.supervisor.listener.respond(n.id, error=kernel.listen(dup, backlog))
        finally:
            os.close(dup)

    # --- sends --------------------------------------------------------------------------------

    def sendto(self, n: Notification) -> None:
        fd, buffer, length, flags = n.arg_int(0), n.args[1], n.args[2], n.arg_int(3)
        raw = self._copied_sockaddr(n, fd, n.args[4], n.arg_int(5))
        if raw is None:
            return None
        try:
            data = self.supervisor.read(n, buffer, min(length, MAX_PAYLOAD)) if buffer else b""
        except OSError:
            data = None
        except Unreadable as exc:
            return self._fail_closed(n, fd, str(exc))
        if not self.supervisor.listener.id_valid(n.id):
            return None
        address = self._parsed(n, raw, sending_address)
        if address is None:
            return None
        if data is None:
            return self.supervisor.deny(n, errno.EFAULT)
        message = Message(raw, data, b"")
        return self._send(n, fd, [(address, message)], flags, truncated=length > MAX_PAYLOAD)

    def _reader(self, n: Notification) -> Callable[[int, int], bytes]:
        return lambda address, length: self.supervisor.read(n, address, length)

    def sendmsg(self, n: Notification) -> None:
        fd, pointer, flags = n.arg_int(0), n.args[1], n.arg_int(2)
        try:
            message = read_msghdr(self._reader(n), pointer)
        except Unreadable as exc:
            return self._fail_closed(n, fd, str(exc))
        except OSError as exc:
            return self._deny_if_valid(n, exc.errno or errno.EFAULT)
        if not self.supervisor.listener.id_valid(n.id):
            return None
        return self._send(n, fd, [message], flags, truncated=False)

    def sendmmsg(self, n: Notification) -> None:
        fd, pointer, count, flags = n.arg_int(0), n.args[1], n.args[2] & 0xFFFFFFFF, n.arg_int(3)
        read = self._reader(n)
        messages: list[Addressed] = []
        try:
            for index in range(min(count, UIO_MAXIOV)):
                messages.append(read_msghdr(read, pointer + MMSGHDR_SIZE * index))
        except Unreadable as exc:
            return self._fail_closed(n, fd, str(exc))
        except OSError as exc:
            if not messages:
                return self.supervisor.deny(n, exc.errno or errno.EFAULT)
        if not self.supervisor.listener.id_valid(n.id):
            return None
        return self._send(n, fd, messages, flags, truncated=False, vector=pointer)

    def _send(
        self,
        n: Notification,
        fd: int,
        messages: list[Addressed],
        flags: int,
        *,
        truncated: bool,
        vector: int | None = None,
    ) -> None:
        """Decide every destination first; refuse the whole call if one is refused. A message
        whose control data chooses an interface other than lo is refused whatever its
        destination: 127.0.0.1 sent out of veth0 leaves the host."""
        for address, message in messages:
            index = foreign_interface(message.control)
            if index is not None:
                where = address.describe() if address is not None else "its connected peer"
                return self._block(n, fd, f"{where} (out of interface {index})", c.DENY_SEND)
        verdicts = []
        for address, message in messages:
            verdict = Verdict.LOCAL if address is None else self._classify(address)
            if verdict is Verdict.DENIED and address is not None:
                query = asked(address, message.data)
                return self._block(n, fd, address.describe(), c.DENY_SEND, query)
            verdicts.append(verdict)

        def action(dup: int) -> tuple[int, int]:
            kind = kernel.getsockopt_int(dup, kernel.SOL_SOCKET, kernel.SO_TYPE)
            if kind != c.SOCK_STREAM and self.lookups.refused(dup, messages):
                return -1, c.DENY_SEND
            refused = self._vet_datagrams(n, dup, kind, messages, verdicts)
            if refused:
                return -1, c.DENY_SEND
            if truncated and kind != c.SOCK_STREAM:
                return -1, errno.EMSGSIZE
            return self._send_all(n, dup, messages, flags, vector)

        self.supervisor.perform(n, fd, action)

    def _vet_datagrams(
        self,
        n: Notification,
        dup: int,
        kind: int,
        messages: list[Addressed],
        verdicts: list[Verdict],
    ) -> bool:
        """Off-host unconnected datagrams are refused, not vetted (connect first): True when
        one is (and recorded); local destinations are noted."""
        for (address, message), verdict in zip(messages, verdicts, strict=True):
            if address is None:
                continue
            if verdict is Verdict.ALLOWED and kind != c.SOCK_STREAM:
                syscall = c.NAME_OF.get(n.nr, "send")
                blocked = Blocked(
                    address.describe(), socket_protocol(dup), self.supervisor.now_ms(), syscall
                )
                if (query := asked(address, message.data)) is not None:
                    self.supervisor.report.add_query(blocked, query)
                self.supervisor.report.add_blocked(blocked)
                return True
            if verdict is Verdict.LOCAL:
                self._note_local(address, dup)
        return False

    def _send_all(
        self, n: Notification, dup: int, messages: list[Addressed], flags: int, vector: int | None
    ) -> tuple[int, int]:
        """Send each message in turn; sendmmsg's msg_len fields are written back as it goes."""
        sent_count = 0
        for index, (_, message) in enumerate(messages):
            value, error = self._send_one(n, dup, message, flags)
            if error:
                return (sent_count, 0) if sent_count else (-1, error)
            if vector is None:
                return value, 0
            with contextlib.suppress(OSError):
                if self.supervisor.listener.id_valid(n.id):
                    address = msg_len_address(vector, index)
                    kernel.write_memory(n.pid, address, struct.pack("<I", value))
            sent_count += 1
        return sent_count, 0

    def _send_one(self, n: Notification, dup: int, message: Message, flags: int) -> tuple[int, int]:
        control, passed = translate_rights(
            message.control, lambda fd: self.supervisor.duplicate(n, fd)
        )
        try:
            if n.nr == _NR_SENDTO:
                return kernel.sendto(dup, message.data, flags, message.name or b"")
            return kernel.sendmsg(dup, message.name, message.data, control, flags)
        finally:
            for fd in passed:
                os.close(fd)


def _connect_relative_unix(supervisor: Host, n: Notification, fd: int, path: str) -> None:
    """A relative unix path is the agent's, not ours: reach it through its cwd."""

    def action(dup: int) -> tuple[int, int]:
        supervisor.report.add_local(f"unix {path}")
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

    supervisor.perform(n, fd, action)
