"""What a send names and carries, read out of copies of the agent's memory: struct msghdr,
its iovecs and control data, and SCM_RIGHTS descriptors swapped for the supervisor's own.

Pure: memory comes through a `read(address, length)` callable and descriptors through a
`duplicate(agent_fd)` one, so all of it is tested with byte strings, without a kernel.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from flowproof_cli.egress import constants as c
from flowproof_cli.egress.sockaddr import MAX_ADDRLEN, Malformed, SockAddr, parse

MAX_PAYLOAD = 1 << 20  # bytes of one emulated send; a stream send beyond it is partial
MAX_CONTROL = 1 << 17
UIO_MAXIOV = 1024
MSGHDR = struct.Struct("<QI4xQQQQi4x")  # struct msghdr
IOVEC = struct.Struct("<QQ")  # struct iovec
MMSGHDR_SIZE = 64  # struct mmsghdr: a msghdr, then msg_len
MSG_LEN_OFFSET = 56
CMSGHDR = struct.Struct("<Qii")  # struct cmsghdr: len, level, type
SCM_RIGHTS = 1
SOL_SOCKET = 1

Reader = Callable[[int, int], bytes]  # (address, length) -> bytes; raises OSError(EFAULT)


class Unreadable(Exception):
    """The agent's memory could not be read for a reason other than a bad pointer."""


@dataclass
class Message:
    name: bytes | None
    data: bytes
    control: bytes


def sending_address(raw: bytes) -> SockAddr:
    """A send's destination. UDP over IPv4 reads an AF_UNSPEC sockaddr as AF_INET (BSD
    compatibility), so for a send it is decided as the IPv4 address it carries."""
    address = parse(raw)
    if address.family == c.AF_UNSPEC and len(raw) >= 16:
        return parse(struct.pack("<H", c.AF_INET) + raw[2:])
    return address


def read_msghdr(read: Reader, pointer: int) -> tuple[SockAddr | None, Message]:
    """One struct msghdr and everything it points to; raises OSError(errno) or Unreadable."""
    name_ptr, namelen, iov_ptr, iovlen, control_ptr, controllen, _ = MSGHDR.unpack(
        read(pointer, MSGHDR.size)
    )
    name: bytes | None = None
    address: SockAddr | None = None
    if name_ptr and namelen:
        name = read(name_ptr, min(namelen, MAX_ADDRLEN))
        try:
            address = sending_address(name)
        except Malformed as exc:
            raise OSError(errno.EINVAL, "short sockaddr") from exc
    data = _gather(read, iov_ptr, iovlen)
    control = b""
    if control_ptr and controllen:
        if controllen > MAX_CONTROL:
            raise OSError(errno.ENOBUFS, "control data too large")
        control = read(control_ptr, controllen)
    return address, Message(name, data, control)


def _gather(read: Reader, iov_ptr: int, iovlen: int) -> bytes:
    """The payload of an iovec array, up to MAX_PAYLOAD bytes."""
    if iovlen > UIO_MAXIOV:
        raise OSError(errno.EMSGSIZE, "too many iovecs")
    if not iovlen:
        return b""
    chunks: list[bytes] = []
    total = 0
    vectors = read(iov_ptr, IOVEC.size * iovlen)
    for index in range(iovlen):
        base, size = IOVEC.unpack_from(vectors, IOVEC.size * index)
        take = min(size, MAX_PAYLOAD - total)
        if take:
            chunks.append(read(base, take))
            total += take
    return b"".join(chunks)


def msg_len_address(vector: int, index: int) -> int:
    """Where sendmmsg reports the bytes sent of its `index`th message."""
    return vector + MMSGHDR_SIZE * index + MSG_LEN_OFFSET


def translate_rights(control: bytes, duplicate: Callable[[int], int]) -> tuple[bytes, list[int]]:
    """SCM_RIGHTS carries the agent's descriptor numbers: pass our duplicates instead.

    Returns the rewritten control data and the duplicates, which the caller closes (on a
    failure half-way, the ones made so far are closed here)."""
    if not control:
        return control, []
    out = bytearray(control)
    passed: list[int] = []
    try:
        for position in _rights_positions(control):
            (agent_fd,) = struct.unpack_from("<i", control, position)
            dup = duplicate(agent_fd)
            passed.append(dup)
            struct.pack_into("<i", out, position, dup)
    except BaseException:
        for fd in passed:
            os.close(fd)
        raise
    return bytes(out), passed


def _control_messages(control: bytes) -> Iterator[tuple[int, int, int, int]]:
    """(data offset, data length, level, type) of each control message, as the kernel walks
    them: a truncated or overlong header ends the walk."""
    offset = 0
    while offset + CMSGHDR.size <= len(control):
        length, level, kind = CMSGHDR.unpack_from(control, offset)
        if length < CMSGHDR.size or offset + length > len(control):
            return
        yield offset + CMSGHDR.size, length - CMSGHDR.size, level, kind
        offset += (length + 7) & ~7


def _rights_positions(control: bytes) -> Iterator[int]:
    """The offset of every descriptor number carried by an SCM_RIGHTS message."""
    for start, length, level, kind in _control_messages(control):
        if level == SOL_SOCKET and kind == SCM_RIGHTS:
            yield from range(start, start + length - 3, 4)


#: (level, type) -> where the interface index sits in its data (in_pktinfo, in6_pktinfo).
_INTERFACE_AT = {
    (c.IPPROTO_IP, c.IP_PKTINFO): 0,
    (c.IPPROTO_IPV6, c.IPV6_PKTINFO): 16,
    (c.IPPROTO_IPV6, c.IPV6_2292PKTINFO): 16,
}


def foreign_interface(control: bytes) -> int | None:
    """The first interface other than lo that a send's IP_PKTINFO / IPV6_PKTINFO names as
    its way out (0, "the route's", is none), or None."""
    for start, length, level, kind in _control_messages(control):
        at = _INTERFACE_AT.get((level, kind))
        if at is None or length < at + 4:
            continue
        (index,) = struct.unpack_from("<i", control, start + at)
        if index not in (0, c.LOOPBACK_IFINDEX):
            return index
    return None
