"""Refused DNS lookups, named by the query they send (egress/dns.py reads it).

A lookup sent with `sendto`/`sendmsg` to a refused resolver carries its query in the call
the supervisor decides, so the name is read from the copy it already made (network.py).
Most resolver libraries (glibc's, c-ares) first `connect` a datagram socket to the
resolver, though, and a refused connect leaves nothing to read: so a datagram socket's
connect to a refused resolver on port 53 is recorded as blocked and answered 0 without
connecting (a UDP connect sends nothing; the socket is left unconnected, so nothing sent
on it can leave). The query the library then sends with `sendmsg`/`sendmmsg` reaches the
supervisor, is named on that record and refused with ECONNREFUSED, as the connect was
before; a `send` or `write`, which the filter lets through, is refused by the kernel itself
(EDESTADDRREQ), and the record keeps the address alone.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

from flowproof_cli.egress import constants as c
from flowproof_cli.egress import kernel
from flowproof_cli.egress.dns import query_name
from flowproof_cli.egress.handlers import Host
from flowproof_cli.egress.kernel import Notification
from flowproof_cli.egress.msghdr import Message
from flowproof_cli.egress.policy import DNS_PORT
from flowproof_cli.egress.report import Blocked
from flowproof_cli.egress.sockaddr import SockAddr

MAX_SOCKETS = 256  # resolver sockets remembered at once; the oldest is forgotten first
_DISCONNECT = struct.pack("<H", c.AF_UNSPEC) + bytes(14)  # connect(AF_UNSPEC): unconnected
Refuse = Callable[[Notification, int, str, int], None]  # record a refused call and answer it


def asked(address: SockAddr | None, data: bytes) -> str | None:
    """The name a datagram to port 53 asks for, or None (another port, not a query)."""
    if address is None or address.port != DNS_PORT:
        return None
    return query_name(data)


def is_resolver(address: SockAddr) -> bool:
    return address.ip is not None and address.port == DNS_PORT


class Lookups:
    """The connects to a refused resolver, by the socket (its inode) whose query names them."""

    def __init__(self, supervisor: Host, refuse: Refuse, protocol_of: Callable[[int], str]) -> None:
        self._supervisor = supervisor
        self._refuse = refuse
        self._protocol_of = protocol_of
        self._sockets: OrderedDict[int, Blocked] = OrderedDict()
        self._lock = threading.Lock()

    def connect(self, n: Notification, fd: int, address: SockAddr) -> None:
        """A connect to a refused resolver: a datagram socket's is recorded, the socket left
        unconnected and the call answered 0; any other socket's is refused like every other."""
        supervisor = self._supervisor
        try:
            dup = supervisor.duplicate(n, fd)
        except OSError:
            return self._refuse(n, fd, address.describe(), c.DENY_CONNECT)
        try:
            kind = kernel.getsockopt_int(dup, kernel.SOL_SOCKET, kernel.SO_TYPE)
            protocol = self._protocol_of(dup)
            # Unconnected, whatever it was connected to before: nothing sent on it leaves.
            error = kernel.connect(dup, _DISCONNECT) if kind == c.SOCK_DGRAM else -1
            inode = os.fstat(dup).st_ino
        except OSError:
            error = -1
        finally:
            os.close(dup)
        if error:
            return self._refuse(n, fd, address.describe(), c.DENY_CONNECT)
        blocked = Blocked(address.describe(), protocol, supervisor.now_ms(), "connect")
        supervisor.report.add_blocked(blocked)
        self._remember(inode, blocked)
        supervisor.listener.respond(n.id, error=0)
        return None

    def refused(self, dup: int, messages: Iterable[tuple[SockAddr | None, Message]]) -> bool:
        """Datagrams sent without an address on a socket `connect` left unconnected: named
        on its record; True when the send is to be refused (ECONNREFUSED)."""
        unaddressed = [message.data for address, message in messages if address is None]
        if not unaddressed:
            return False
        with self._lock:
            blocked = self._sockets.get(os.fstat(dup).st_ino)
        if blocked is None:
            return False
        for data in unaddressed:
            name = query_name(data)
            if name is not None:
                self._supervisor.report.add_query(blocked, name)
        return True

    def _remember(self, inode: int, blocked: Blocked) -> None:
        with self._lock:
            self._sockets[inode] = blocked
            self._sockets.move_to_end(inode)
            while len(self._sockets) > MAX_SOCKETS:
                self._sockets.popitem(last=False)
