"""The seccomp filter: what is refused in-kernel, what the supervisor sees.

The rules are data (`rules()`); libseccomp, through pyseccomp, compiles them into the classic
BPF program the stub installs. Everything is decided on syscall numbers and register values,
which no sibling thread can race; anything that needs memory (an address, a path) goes to the
supervisor (USER_NOTIF).

    foreign architecture (i386 `int 0x80`), x32 bit      -> EPERM (libseccomp's bad-arch action)
    connect, sendmsg, sendmmsg, listen                     -> supervisor
    sendto with a non-NULL dest_addr                       -> supervisor (NULL: allowed)
    socket(family not unix/inet/inet6/netlink/alg)         -> EAFNOSUPPORT (packet, vsock, ...)
    socket(AF_INET*, SOCK_RAW | SOCK_PACKET)               -> EPERM
    socket(AF_INET*, *, IPPROTO_SCTP | IPPROTO_MPTCP)      -> EPROTONOSUPPORT
    io_uring_setup / _enter / _register                    -> EPERM
    setsockopt joining a multicast group                   -> EPERM
    setsockopt choosing the outgoing interface             -> EPERM (SO_BINDTODEVICE,
                                                              SO_BINDTOIFINDEX, IP(V6)_UNICAST_IF)
    prctl(PR_SET_DUMPABLE, ...)                            -> 0 without effect (the agent stays
                                                              readable by the supervisor)
    unlink*, rmdir, rename*, truncate, ftruncate, creat,
    openat2, open/openat whose flags carry O_TRUNC         -> supervisor (observed, CONTINUE)
    anything else                                          -> allowed

libseccomp compares 64-bit values; where the kernel reads an argument as a C int (socket's
three, prctl's option, setsockopt's level and name) the rule compares the low 32 bits under
a mask, so high garbage bits can neither hide a refused value nor refuse an allowed one.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType

from flowproof_cli.egress import constants as c

LIBSECCOMP_MISSING = "libseccomp not found"
INT = 0xFFFFFFFF  # the bits of an argument the kernel reads as a C int


class FilterUnavailable(Exception):
    """libseccomp is missing or refused a rule: the agent runs not contained, with the reason."""


@dataclass(frozen=True)
class Cmp:
    """One argument comparison as libseccomp takes it: `op` names a pyseccomp operator."""

    arg: int
    op: str  # "NE" or "MASKED_EQ"
    a: int  # the value (NE) or the mask (MASKED_EQ)
    b: int = 0  # the value under the mask (MASKED_EQ)


@dataclass(frozen=True)
class Rule:
    action: int  # a SECCOMP_RET_* value
    syscall: str  # a name in constants.NR
    where: tuple[Cmp, ...] = ()


def int_is(arg: int, value: int) -> Cmp:
    """The argument, read as the kernel reads a C int (its low 32 bits), equals `value`."""
    return Cmp(arg, "MASKED_EQ", INT, value)


def bits_set(arg: int, bits: int) -> Cmp:
    return Cmp(arg, "MASKED_EQ", bits, bits)


def errno_action(value: int) -> int:
    return c.SECCOMP_RET_ERRNO | (value & 0xFFFF)


def outside(values: Iterable[int], width: int = 32) -> list[tuple[int, int]]:
    """(mask, value) pairs that together match every `width`-bit number but `values`.

    libseccomp has no "not one of" test, so a whitelist is refused as its complement: walking
    the binary trie of `values` from the top bit down, every branch that holds none of them
    is one pattern (the branch's prefix, under the mask of the bits decided so far)."""
    wanted = set(values)
    patterns: list[tuple[int, int]] = []
    parents = {0}
    for bit in reversed(range(width)):
        mask = ((1 << width) - 1) & ~((1 << bit) - 1)
        children = {value & mask for value in wanted}
        for parent in sorted(parents):
            for branch in (parent, parent | 1 << bit):
                if branch not in children:
                    patterns.append((mask, branch))
        parents = children
    return patterns


def rules() -> Iterator[Rule]:
    """Every rule of the filter; a syscall without one is allowed."""
    notify = c.SECCOMP_RET_USER_NOTIF
    for name in (*c.NETWORK_TRAPS, *c.FS_TRAPS):
        if name not in ("sendto", "open", "openat"):
            yield Rule(notify, name)
    yield Rule(notify, "sendto", (Cmp(4, "NE", 0),))  # a NULL dest_addr cannot be raced
    yield Rule(notify, "open", (bits_set(1, c.O_TRUNC),))
    yield Rule(notify, "openat", (bits_set(2, c.O_TRUNC),))
    yield from _socket_rules()
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        yield Rule(errno_action(c.REFUSE_IO_URING), name)
    # prctl(PR_SET_DUMPABLE, ...) succeeds without effect: a non-dumpable agent would blind an
    # unprivileged supervisor (it would then fail closed, but would not be useful).
    yield Rule(errno_action(0), "prctl", (int_is(0, c.PR_SET_DUMPABLE),))
    # setsockopt(fd, level, optname, ...): joining a multicast group sends IGMP/MLD reports.
    refuse_join = errno_action(c.REFUSE_MULTICAST_JOIN)
    for level, options in (
        (c.IPPROTO_IP, c.MULTICAST_JOIN_V4),
        (c.IPPROTO_IPV6, c.MULTICAST_JOIN_V6),
    ):
        for option in options:
            yield Rule(refuse_join, "setsockopt", (int_is(1, level), int_is(2, option)))
    # ...and choosing the outgoing interface would send "loopback" traffic off-host.
    refuse_interface = errno_action(c.REFUSE_INTERFACE_CHOICE)
    for level, choices in c.INTERFACE_CHOICE:
        for choice in choices:
            yield Rule(refuse_interface, "setsockopt", (int_is(1, level), int_is(2, choice)))


def _socket_rules() -> Iterator[Rule]:
    """socket(domain, type, protocol): a family whitelist, then raw and unvetted protocols."""
    refuse_family = errno_action(c.REFUSE_FAMILY)
    for mask, value in outside(c.ALLOWED_FAMILIES):
        yield Rule(refuse_family, "socket", (Cmp(0, "MASKED_EQ", mask, value),))
    for family in (c.AF_INET, c.AF_INET6):
        for kind in (c.SOCK_RAW, c.SOCK_PACKET):
            raw = Cmp(1, "MASKED_EQ", c.SOCK_TYPE_MASK, kind)
            yield Rule(errno_action(c.REFUSE_RAW), "socket", (int_is(0, family), raw))
        for protocol in (c.IPPROTO_SCTP, c.IPPROTO_MPTCP):
            refuse = errno_action(c.REFUSE_PROTOCOL)
            yield Rule(refuse, "socket", (int_is(0, family), int_is(2, protocol)))


def _library() -> ModuleType:
    try:
        import pyseccomp  # noqa: PLC0415 (loads libseccomp.so: only when a filter is built)
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: no libseccomp.so
        raise FilterUnavailable(LIBSECCOMP_MISSING) from exc
    return pyseccomp


@functools.cache
def program() -> bytes:
    """The filter as the kernel reads it (struct sock_filter[], x86_64), compiled once.

    Raises FilterUnavailable when libseccomp is missing or refuses a rule."""
    seccomp = _library()
    try:
        compiled = seccomp.SyscallFilter(c.SECCOMP_RET_ALLOW)
        compiled.set_attr(seccomp.Attr.ACT_BADARCH, errno_action(c.REFUSE_ARCH))
        with contextlib.suppress(OSError):  # libseccomp < 2.5 knows one layout only
            # Syscall numbers as a binary tree: ~11 instructions for an allowed call, not ~28.
            compiled.set_attr(seccomp.Attr.CTL_OPTIMIZE, 2)
        for rule in rules():
            where = [
                seccomp.Arg(cmp.arg, getattr(seccomp, cmp.op), cmp.a, cmp.b) for cmp in rule.where
            ]
            compiled.add_rule(rule.action, c.NR[rule.syscall], *where)
        with tempfile.TemporaryFile() as out:
            compiled.export_bpf(out)
            out.seek(0)
            return out.read()
    except OSError as exc:
        raise FilterUnavailable(f"libseccomp refused the filter ({exc.strerror})") from exc


def unavailable_reason() -> str | None:
    """Why no filter can be built here (libseccomp missing or refusing), or None."""
    try:
        program()
    except FilterUnavailable as exc:
        return str(exc)
    return None
