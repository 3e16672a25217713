"""struct msghdr, iovec and SCM_RIGHTS reading (egress/msghdr.py), over fake agent memory:
no kernel, no agent, only the bytes a send would point the supervisor at."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct

import pytest

from flowproof_cli.egress import constants as c
from flowproof_cli.egress.msghdr import (
    MAX_CONTROL,
    MAX_PAYLOAD,
    MSGHDR,
    UIO_MAXIOV,
    foreign_interface,
    msg_len_address,
    read_msghdr,
    sending_address,
    translate_rights,
)


class Memory:
    """Agent memory as a few mapped regions; anything else reads as EFAULT."""

    def __init__(self) -> None:
        self.regions: dict[int, bytes] = {}
        self.asked: list[tuple[int, int]] = []
        self._next = 0x10000

    def put(self, data: bytes) -> int:
        address = self._next
        self.regions[address] = data
        self._next += (len(data) + 0xFFF) & ~0xFFF or 0x1000
        return address

    def read(self, address: int, length: int) -> bytes:
        self.asked.append((address, length))
        for start, data in self.regions.items():
            if start <= address and address + length <= start + len(data):
                return data[address - start : address - start + length]
        raise OSError(errno.EFAULT, "bad address")


def sockaddr_in(ip: str, port: int) -> bytes:
    return struct.pack("<H", c.AF_INET) + struct.pack(">H", port) + socket.inet_aton(ip) + bytes(8)


def msghdr(name: int = 0, namelen: int = 0, iov: int = 0, iovlen: int = 0, control: int = 0,
           controllen: int = 0) -> bytes:  # fmt: skip
    return MSGHDR.pack(name, namelen, iov, iovlen, control, controllen, 0)


def iovecs(memory: Memory, *chunks: bytes) -> int:
    return memory.put(
        b"".join(struct.pack("<QQ", memory.put(chunk), len(chunk)) for chunk in chunks)
    )


def test_a_msghdr_is_read_whole() -> None:
    memory = Memory()
    name = memory.put(sockaddr_in("203.0.113.7", 53))
    iov = iovecs(memory, b"hello ", b"world")
    control = memory.put(b"\x01" * 24)
    header = memory.put(msghdr(name, 16, iov, 2, control, 24))
    address, message = read_msghdr(memory.read, header)
    assert address is not None
    assert (address.ip, address.port) == (ipaddress.ip_address("203.0.113.7"), 53)
    assert (message.name, message.data, message.control) == (
        sockaddr_in("203.0.113.7", 53),
        b"hello world",
        b"\x01" * 24,
    )


def test_a_msghdr_without_a_name_is_sent_on_the_connection() -> None:
    memory = Memory()
    header = memory.put(msghdr(iov=iovecs(memory, b"x"), iovlen=1))
    address, message = read_msghdr(memory.read, header)
    assert address is None and message.name is None and message.data == b"x"


def test_an_unspec_address_of_a_send_is_read_as_ipv4() -> None:
    raw = struct.pack("<H", c.AF_UNSPEC) + sockaddr_in("198.51.100.1", 443)[2:]
    address = sending_address(raw)
    assert (address.family, str(address.ip), address.port) == (c.AF_INET, "198.51.100.1", 443)
    assert sending_address(struct.pack("<H", c.AF_UNSPEC)).describe() == "AF_UNSPEC"


def test_the_payload_read_stops_at_the_cap() -> None:
    memory = Memory()
    big = memory.put(bytes(MAX_PAYLOAD + 10))
    iov = memory.put(struct.pack("<QQ", big, MAX_PAYLOAD + 10) + struct.pack("<QQ", big, 5))
    header = memory.put(msghdr(iov=iov, iovlen=2))
    _, message = read_msghdr(memory.read, header)
    assert len(message.data) == MAX_PAYLOAD
    assert (big, MAX_PAYLOAD + 10) not in memory.asked  # never asked for more than the cap


@pytest.mark.parametrize(
    ("fields", "number"),
    [
        ({"iovlen": UIO_MAXIOV + 1}, errno.EMSGSIZE),
        ({"control": 0x10, "controllen": MAX_CONTROL + 1}, errno.ENOBUFS),
        ({"iov": 0xDEAD0000, "iovlen": 1}, errno.EFAULT),
    ],
)
def test_what_the_kernel_would_refuse_is_refused_with_its_errno(
    fields: dict[str, int], number: int
) -> None:
    memory = Memory()
    header = memory.put(msghdr(**fields))
    with pytest.raises(OSError) as caught:
        read_msghdr(memory.read, header)
    assert caught.value.errno == number


def test_a_short_name_is_einval_and_an_unmapped_header_efault() -> None:
    memory = Memory()
    short = memory.put(struct.pack("<H", c.AF_INET) + bytes(4))
    with pytest.raises(OSError) as caught:
        read_msghdr(memory.read, memory.put(msghdr(short, 6)))
    assert caught.value.errno == errno.EINVAL
    with pytest.raises(OSError) as caught:
        read_msghdr(memory.read, 0xBAD000)
    assert caught.value.errno == errno.EFAULT


def cmsg(level: int, kind: int, payload: bytes) -> bytes:
    body = struct.pack("<Qii", 16 + len(payload), level, kind) + payload
    return body + bytes(-len(body) % 8)


def test_scm_rights_carry_our_duplicates_not_the_agents_numbers() -> None:
    other = cmsg(socket.SOL_SOCKET, 2, struct.pack("<ii", 5, 7))  # SCM_CREDENTIALS-like
    rights = cmsg(socket.SOL_SOCKET, 1, struct.pack("<ii", 5, 7))
    control, passed = translate_rights(other + rights, lambda fd: fd + 100)
    assert passed == [105, 107]
    assert control[: len(other)] == other  # only SCM_RIGHTS is rewritten
    assert struct.unpack_from("<ii", control, len(other) + 16) == (105, 107)
    assert translate_rights(b"", lambda fd: fd) == (b"", [])


def test_a_failed_duplicate_closes_the_ones_already_made() -> None:
    made: list[int] = []

    def duplicate(fd: int) -> int:
        if made:
            raise OSError(errno.EBADF, "gone")
        made.append(os.dup(0))
        return made[0]

    with pytest.raises(OSError, match="gone"):
        translate_rights(cmsg(socket.SOL_SOCKET, 1, struct.pack("<ii", 3, 4)), duplicate)
    with pytest.raises(OSError) as caught:
        os.fstat(made[0])
    assert caught.value.errno == errno.EBADF


def test_a_pktinfo_naming_an_interface_other_than_lo_is_found() -> None:
    def v4(index: int) -> bytes:
        return cmsg(c.IPPROTO_IP, c.IP_PKTINFO, struct.pack("<i4s4s", index, bytes(4), bytes(4)))

    def v6(index: int, kind: int = c.IPV6_PKTINFO) -> bytes:
        return cmsg(c.IPPROTO_IPV6, kind, bytes(16) + struct.pack("<i", index))

    rights = cmsg(socket.SOL_SOCKET, 1, struct.pack("<i", 2))
    assert foreign_interface(rights + v4(2)) == 2
    assert foreign_interface(v6(3)) == 3
    assert foreign_interface(v6(4, c.IPV6_2292PKTINFO)) == 4
    assert foreign_interface(v4(0) + v4(c.LOOPBACK_IFINDEX) + v6(0)) is None  # route's; lo
    assert foreign_interface(rights) is None
    assert foreign_interface(v4(2)[:20]) is None  # truncated: the kernel stops there too


def test_sendmmsg_reports_each_msg_len_after_its_msghdr() -> None:
    assert msg_len_address(0x1000, 0) == 0x1000 + MSGHDR.size
    assert msg_len_address(0x1000, 2) == 0x1000 + 2 * 64 + 56
