"""Reading a sockaddr copied out of the agent, the way the kernel will read the same bytes."""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from flowproof_cli.egress import constants as c
from flowproof_cli.egress.policy import IPAddress, format_destination, normalise

MAX_ADDRLEN = 128  # sizeof(struct sockaddr_storage); the kernel refuses longer with EINVAL
SOCKADDR_IN_LEN = 16
SOCKADDR_IN6_MIN = 24  # SIN6_LEN_RFC2133: without sin6_scope_id


@dataclass(frozen=True)
class SockAddr:
    family: int
    ip: IPAddress | None = None  # INET / INET6, v4-mapped normalised to IPv4
    port: int = 0
    path: str | None = None  # AF_UNIX: a path, "@name" for abstract, "" unnamed

    def describe(self) -> str:
        if self.ip is not None:
            return format_destination(self.ip, self.port)
        if self.family == c.AF_UNIX:
            return self.path or "(unnamed)"
        if self.family == c.AF_UNSPEC:
            return "AF_UNSPEC"
        return f"family {self.family}"


class Malformed(ValueError):
    """Too short to be the family it claims: the kernel would answer EINVAL."""


def parse(raw: bytes) -> SockAddr:
    if len(raw) < 2:
        raise Malformed("shorter than sa_family")
    (family,) = struct.unpack_from("<H", raw)
    if family == c.AF_INET:
        if len(raw) < SOCKADDR_IN_LEN:
            raise Malformed("short sockaddr_in")
        (port,) = struct.unpack_from(">H", raw, 2)
        return SockAddr(family, ipaddress.IPv4Address(raw[4:8]), port)
    if family == c.AF_INET6:
        if len(raw) < SOCKADDR_IN6_MIN:
            raise Malformed("short sockaddr_in6")
        (port,) = struct.unpack_from(">H", raw, 2)
        address = normalise(ipaddress.IPv6Address(raw[8:24]))
        return SockAddr(family, address, port)
    if family == c.AF_UNIX:
        path = raw[2:]
        if path[:1] == b"\0":
            return SockAddr(family, path="@" + path[1:].decode("utf-8", "replace"))
        return SockAddr(family, path=path.split(b"\0", 1)[0].decode("utf-8", "replace"))
    return SockAddr(family)
