"""Naming a refused DNS lookup: the query name read from the datagram (no kernel needed),
and how the report and `assert_no_egress` word a named lookup."""

from __future__ import annotations

import ipaddress
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from flowproof_cli.egress.dns import MAX_POINTERS, _read_name, query_name
from flowproof_cli.egress.lookups import asked
from flowproof_cli.egress.report import Blocked, Containment, EgressReport
from flowproof_cli.egress.sockaddr import SockAddr

A, AAAA, IN = 1, 28, 1


def encoded(name: str) -> bytes:
    """A name in wire form, by hand (RFC 1035 3.1)."""
    labels = [label.encode() for label in name.split(".") if label]
    return b"".join(bytes([len(label)]) + label for label in labels) + b"\0"


def query(name: str | bytes, qtype: int = A, *, flags: int = 0x0100, ident: int = 0xBEEF) -> bytes:
    """A recursive query as a resolver library sends it: header, one question."""
    wire = encoded(name) if isinstance(name, str) else name
    return struct.pack(">HHHHHH", ident, flags, 1, 0, 0, 0) + wire + struct.pack(">HH", qtype, IN)


# The query glibc's resolver sent for `getaddrinfo("registry.npmjs.org", 443)` (strace of
# its sendmmsg): both questions, A and AAAA, each in a datagram of its own.
GLIBC_A = (
    b"\xfc\xc5\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    b"\x08registry\x05npmjs\x03org\x00\x00\x01\x00\x01"
)
GLIBC_AAAA = (
    b"\x99\xc1\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    b"\x08registry\x05npmjs\x03org\x00\x00\x1c\x00\x01"
)


def test_the_queries_a_resolver_library_sends_are_named() -> None:
    assert query_name(GLIBC_A) == "registry.npmjs.org"
    assert query_name(GLIBC_AAAA) == "registry.npmjs.org"
    assert query("registry.npmjs.org", A, ident=0xFCC5) == GLIBC_A
    plain = query("x.example")
    opt = b"\x00" + struct.pack(">HHIH", 41, 1232, 0, 0)  # EDNS0: an OPT record, ARCOUNT 1
    assert query_name(plain[:10] + b"\x00\x01" + plain[12:] + opt) == "x.example"
    assert query_name(query("", A)) == "."  # the root


def test_a_name_compressed_backwards_is_followed() -> None:
    """In the first question a pointer can only loop (nothing but the header precedes it);
    a later name pointing back into an earlier one is read through it."""
    packet = query("example.com") + b"\x03api\xc0\x0c" + b"\0\1\0\1"
    second = len(query("example.com"))
    assert _read_name(packet, second) == ([b"api", b"example", b"com"], second + 6)
    assert query_name(packet) == "example.com"


def test_odd_octets_are_escaped_so_no_name_passes_for_another() -> None:
    assert query_name(query(b"\x07evil.co\x03com\x00")) == "evil\\046co.com"
    assert query_name(query(b"\x04a b\n\x00")) == "a\\032b\\010"
    assert query_name(query(b"\x02\\x\x00")) == "\\092x"
    assert query_name(query(b"\x03\xd0\xb0b\x00")) == "\\208\\176b"


def test_what_is_not_a_well_formed_query_is_none() -> None:
    good = query("registry.npmjs.org")
    assert query_name(good[:-1]) is None  # QCLASS cut short
    assert query_name(good[:20]) is None  # inside a label
    assert query_name(good[:12]) is None  # header only
    assert query_name(b"") is None
    assert query_name(query("a.com", flags=0x8180)) is None  # a response, not a query
    no_question = good[:4] + b"\0\0" + good[6:]
    assert query_name(no_question) is None
    assert query_name(query(b"\x41abc\x00")) is None  # 0x40: extended label type
    assert query_name(query(b"\x81abc\x00")) is None  # 0x80: reserved label type
    assert query_name(query(b"\x3f" + b"a" * 62 + b"\x00")) is None  # label longer than it holds
    long_name = b"".join(b"\x3f" + b"a" * 63 for _ in range(4)) + b"\x00"  # 257 octets
    assert query_name(query(long_name)) is None
    itself = struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c" + b"\0\1\0\1"
    assert query_name(itself) is None  # a pointer to itself: a loop
    forward = struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\xc0\x10\0\1\0\1"
    assert query_name(forward) is None  # forwards
    into_header = struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\xc0\x02\0\1\0\1"
    assert query_name(into_header) is None
    assert query_name(query(b"\xc0")) is None  # a pointer cut in half


def test_a_chain_of_pointers_is_cut() -> None:
    """Each pointer one step back to the one before: more than MAX_POINTERS is malformed."""

    def chain(count: int) -> tuple[bytes, int]:
        packet = query("a")  # the name "a" at offset 12
        pointers = [12] + [len(packet) + 2 * step for step in range(count - 1)]
        packet += b"".join(struct.pack(">H", 0xC000 | target) for target in pointers)
        return packet, len(packet) - 2

    packet, last = chain(MAX_POINTERS)
    assert _read_name(packet, last) == ([b"a"], last + 2)
    packet, last = chain(MAX_POINTERS + 1)
    assert _read_name(packet, last) is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_give_a_name_or_none(packet: bytes) -> None:
    name = query_name(packet)
    assert name is None or (name.isprintable() and len(name) <= 4 * 255)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.binary(min_size=1, max_size=20).filter(lambda label: b"." not in label), max_size=8
    ),
    st.sampled_from([A, AAAA, 16, 255]),
)
def test_every_well_formed_name_reads_back(labels: list[bytes], qtype: int) -> None:
    wire = b"".join(bytes([len(label)]) + label for label in labels) + b"\0"
    name = query_name(query(wire, qtype))
    assert name is not None
    if all(label.isascii() and label.isalnum() for label in labels):
        assert name == (b".".join(labels).decode() or ".")
    assert name.count(".") == max(len(labels) - 1, 0) or name == "."


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=300))
def test_cutting_or_corrupting_a_query_never_raises(tail: bytes, cut: int) -> None:
    packet = (query("registry.npmjs.org") + tail)[:cut]
    name = query_name(packet)
    assert name is None or name == "registry.npmjs.org"


def test_only_datagrams_to_port_53_are_read_as_queries() -> None:
    to = SockAddr(2, ip=ipaddress.ip_address("10.255.255.53"), port=53)
    assert asked(to, GLIBC_A) == "registry.npmjs.org"
    assert asked(SockAddr(2, ip=to.ip, port=5353), GLIBC_A) is None
    assert asked(None, GLIBC_A) is None
    assert asked(to, b"dns") is None


def test_a_named_lookup_in_the_report_and_the_verdict() -> None:
    report = EgressReport(Containment(True))
    named = Blocked("10.255.255.53:53", "udp", 144, "connect")
    report.add_blocked(named)
    report.add_query(named, "registry.npmjs.org")
    report.add_query(named, "registry.npmjs.org")  # the AAAA question: once
    report.add_blocked(Blocked("203.0.113.7:443", "tcp", 150))
    assert report.blocked_lines() == [
        "  blocked dns registry.npmjs.org (udp 10.255.255.53:53, connect) at 144ms",
        "  blocked tcp 203.0.113.7:443 (connect) at 150ms",
    ]
    assert report.trace_section()[0] == {
        "destination": "10.255.255.53:53",
        "protocol": "udp",
        "at_ms": 144,
    }
    assert named == Blocked("10.255.255.53:53", "udp", 144, "connect")  # names aside
