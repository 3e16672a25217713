"""The name a DNS query asks for, read from the datagram a resolver library sends.

A refused lookup is otherwise reported by the resolver's address alone (`udp
10.255.255.53:53`), which says nothing about what the agent wanted to reach. The datagram
is the agent's, so the reading is bounded and total: the header, the first question's name
(at most 255 bytes in wire form, plain labels, compression pointers only backwards and at
most `MAX_POINTERS` of them) and its type and class. Anything else (a response, no
question, an extended or reserved label type, a pointer forward or into the header, a
packet cut short) is None, and the report keeps the address alone.
"""

from __future__ import annotations

HEADER = 12  # id, flags, and the four section counts
MAX_NAME = 255  # RFC 1035 2.3.4: a name's wire form, its length octets included
MAX_POINTERS = 16  # a real query needs none; a loop is cut long before this
QUESTION_TAIL = 4  # QTYPE and QCLASS after the name
_RESPONSE = 0x8000  # the QR bit of the flags
_POINTER = 0xC0
#: Label octets printed as they are; every other one as `\DDD` (RFC 1035 5.1), so a name
#: that holds a dot, a backslash, a space or a control character cannot pass for another.
_PLAIN = frozenset(range(0x21, 0x7F)) - {ord("."), ord("\\")}


def query_name(packet: bytes) -> str | None:
    """The name of the first question of a DNS query, in presentation form (`.` for the
    root), or None when `packet` is not a well-formed query."""
    if len(packet) < HEADER + 1 + QUESTION_TAIL:
        return None
    flags = int.from_bytes(packet[2:4], "big")
    questions = int.from_bytes(packet[4:6], "big")
    if flags & _RESPONSE or questions == 0:
        return None
    read = _read_name(packet, HEADER)
    if read is None:
        return None
    labels, end = read
    if end + QUESTION_TAIL > len(packet):
        return None
    return ".".join(_presented(label) for label in labels) or "."


def _read_name(packet: bytes, offset: int) -> tuple[list[bytes], int] | None:
    """The labels of the name at `offset`, and where the data after it starts."""
    labels: list[bytes] = []
    size = 1  # the root's zero octet
    end: int | None = None  # after the first pointer, the name continues elsewhere
    pointers = 0
    position = offset
    while position < len(packet):
        length = packet[position]
        if length & _POINTER == _POINTER:
            if position + 1 >= len(packet):
                return None
            target = (length & ~_POINTER) << 8 | packet[position + 1]
            pointers += 1
            if pointers > MAX_POINTERS or not HEADER <= target < position:
                return None
            end = position + 2 if end is None else end
            position = target
            continue
        if length & _POINTER:  # 0x40 (extended) and 0x80 (reserved) label types
            return None
        if length == 0:
            return labels, position + 1 if end is None else end
        size += 1 + length
        label = packet[position + 1 : position + 1 + length]
        if size > MAX_NAME or len(label) < length:
            return None
        labels.append(label)
        position += 1 + length
    return None


def _presented(label: bytes) -> str:
    return "".join(chr(octet) if octet in _PLAIN else f"\\{octet:03d}" for octet in label)
