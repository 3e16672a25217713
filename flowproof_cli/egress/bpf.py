"""The seccomp filter, as classic BPF: what is refused in-kernel, what the supervisor sees.

Everything is decided on syscall numbers and register values, which no sibling thread can
race; anything that needs memory (an address, a path) goes to the supervisor (USER_NOTIF).

    foreign architecture (i386 `int 0x80`), x32 bit      -> EPERM
    connect, sendmsg, sendmmsg, listen                     -> supervisor
    sendto with a non-NULL dest_addr                       -> supervisor (NULL: allowed)
    socket(family not unix/inet/inet6/netlink/alg)         -> EAFNOSUPPORT (packet, vsock, ...)
    socket(AF_INET*, SOCK_RAW | SOCK_PACKET)               -> EPERM
    socket(AF_INET*, *, IPPROTO_SCTP | IPPROTO_MPTCP)      -> EPROTONOSUPPORT
    io_uring_setup / _enter / _register                    -> EPERM
    setsockopt joining a multicast group                   -> EPERM
    prctl(PR_SET_DUMPABLE, ...)                            -> 0 without effect (the agent stays
                                                              readable by the supervisor)
    unlink*, rmdir, rename*, truncate, ftruncate, creat,
    openat2, open/openat whose flags carry O_TRUNC         -> supervisor (observed, CONTINUE)
    anything else                                          -> allowed
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from flowproof_cli.egress import constants as c

# Classic BPF opcodes.
LD_W_ABS = 0x20
JMP_JA = 0x05
JMP_JEQ_K = 0x15
JMP_JGE_K = 0x35
JMP_JSET_K = 0x45
ALU_AND_K = 0x54
RET_K = 0x06

# struct seccomp_data offsets.
OFF_NR = 0
OFF_ARCH = 4


def arg_lo(index: int) -> int:
    return 16 + 8 * index


def arg_hi(index: int) -> int:
    return 20 + 8 * index


Instruction = tuple[int, int, int, int]  # code, jt, jf, k


@dataclass
class _Jump:
    code: int
    k: int
    true: str | None  # label, or None for "next instruction"
    false: str | None


class _Assembler:
    """A tiny two-pass assembler: conditional jumps name labels, resolved to offsets."""

    def __init__(self) -> None:
        self.items: list[Instruction | _Jump | str] = []

    def label(self, name: str) -> None:
        self.items.append(name)

    def op(self, code: int, k: int = 0) -> None:
        self.items.append((code, 0, 0, k))

    def jump(self, code: int, k: int, true: str | None, false: str | None = None) -> None:
        self.items.append(_Jump(code, k, true, false))

    def ret(self, action: int) -> None:
        self.op(RET_K, action)

    def assemble(self) -> list[Instruction]:
        positions: dict[str, int] = {}
        count = 0
        for item in self.items:
            if isinstance(item, str):
                positions[item] = count
            else:
                count += 1
        program: list[Instruction] = []
        for item in self.items:
            if isinstance(item, str):
                continue
            here = len(program)
            if isinstance(item, _Jump) and item.code == JMP_JA:
                program.append((JMP_JA, 0, 0, positions[str(item.true)] - here - 1))
            elif isinstance(item, _Jump):
                offsets = []
                for target in (item.true, item.false):
                    offset = 0 if target is None else positions[target] - here - 1
                    if not 0 <= offset <= 255:
                        raise ValueError(f"jump to {target} out of range ({offset})")
                    offsets.append(offset)
                program.append((item.code, offsets[0], offsets[1], item.k))
            else:
                program.append(item)
        return program


def errno_action(value: int) -> int:
    return c.SECCOMP_RET_ERRNO | (value & 0xFFFF)


def instructions() -> list[Instruction]:  # noqa: PLR0915 (a program listing)
    """The filter program (x86_64). cBPF only jumps forward, so every shared return
    (allow, notify, each refusal) sits at the end."""
    a = _Assembler()
    a.op(LD_W_ABS, OFF_ARCH)
    a.jump(JMP_JEQ_K, c.AUDIT_ARCH_X86_64, None, "refuse_arch")
    a.op(LD_W_ABS, OFF_NR)
    a.jump(JMP_JGE_K, c.X32_SYSCALL_BIT, "refuse_arch")
    for name in c.NETWORK_TRAPS:
        if name != "sendto":
            a.jump(JMP_JEQ_K, c.NR[name], "notify")
    a.jump(JMP_JEQ_K, c.NR["sendto"], "sendto")
    a.jump(JMP_JEQ_K, c.NR["socket"], "socket")
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        a.jump(JMP_JEQ_K, c.NR[name], "refuse_io_uring")
    a.jump(JMP_JEQ_K, c.NR["prctl"], "prctl")
    a.jump(JMP_JEQ_K, c.NR["setsockopt"], "setsockopt")
    for name in c.FS_TRAPS:
        if name not in ("open", "openat"):
            a.jump(JMP_JEQ_K, c.NR[name], "notify")
    a.jump(JMP_JEQ_K, c.NR["open"], "open")
    a.jump(JMP_JEQ_K, c.NR["openat"], "openat", "allow")

    # sendto(fd, buf, len, flags, dest_addr, addrlen): a NULL address cannot be raced.
    a.label("sendto")
    a.op(LD_W_ABS, arg_lo(4))
    a.jump(JMP_JEQ_K, 0, None, "notify")
    a.op(LD_W_ABS, arg_hi(4))
    a.jump(JMP_JEQ_K, 0, "allow", "notify")

    # socket(domain, type, protocol): the kernel reads each as an int (low 32 bits).
    a.label("socket")
    a.op(LD_W_ABS, arg_lo(0))
    a.jump(JMP_JEQ_K, c.AF_INET, "inet")
    a.jump(JMP_JEQ_K, c.AF_INET6, "inet")
    for family in c.ALLOWED_FAMILIES:
        if family not in (c.AF_INET, c.AF_INET6):
            a.jump(JMP_JEQ_K, family, "allow")
    a.jump(JMP_JA, 0, "refuse_family")
    a.label("inet")
    a.op(LD_W_ABS, arg_lo(1))
    a.op(ALU_AND_K, c.SOCK_TYPE_MASK)
    a.jump(JMP_JEQ_K, c.SOCK_RAW, "refuse_raw")
    a.jump(JMP_JEQ_K, c.SOCK_PACKET, "refuse_raw")
    a.op(LD_W_ABS, arg_lo(2))
    a.jump(JMP_JEQ_K, c.IPPROTO_SCTP, "refuse_protocol")
    a.jump(JMP_JEQ_K, c.IPPROTO_MPTCP, "refuse_protocol", "allow")

    # prctl(PR_SET_DUMPABLE, ...) succeeds without effect: a non-dumpable agent would blind an
    # unprivileged supervisor (it would then fail closed, but would not be useful).
    a.label("prctl")
    a.op(LD_W_ABS, arg_lo(0))
    a.jump(JMP_JEQ_K, c.PR_SET_DUMPABLE, "fake_success", "allow")

    # setsockopt(fd, level, optname, ...): joining a multicast group sends IGMP/MLD reports.
    a.label("setsockopt")
    a.op(LD_W_ABS, arg_lo(1))
    a.jump(JMP_JEQ_K, c.IPPROTO_IP, "ip_option")
    a.jump(JMP_JEQ_K, c.IPPROTO_IPV6, "ip6_option", "allow")
    a.label("ip_option")
    a.op(LD_W_ABS, arg_lo(2))
    for option in c.MULTICAST_JOIN_V4:
        a.jump(JMP_JEQ_K, option, "refuse_join")
    a.jump(JMP_JA, 0, "allow")
    a.label("ip6_option")
    a.op(LD_W_ABS, arg_lo(2))
    for option in c.MULTICAST_JOIN_V6:
        a.jump(JMP_JEQ_K, option, "refuse_join")
    a.jump(JMP_JA, 0, "allow")

    # open(path, flags) / openat(dirfd, path, flags): only O_TRUNC reaches the supervisor.
    a.label("open")
    a.op(LD_W_ABS, arg_lo(1))
    a.jump(JMP_JSET_K, c.O_TRUNC, "notify", "allow")
    a.label("openat")
    a.op(LD_W_ABS, arg_lo(2))
    a.jump(JMP_JSET_K, c.O_TRUNC, "notify", "allow")

    a.label("allow")
    a.ret(c.SECCOMP_RET_ALLOW)
    a.label("notify")
    a.ret(c.SECCOMP_RET_USER_NOTIF)
    a.label("refuse_arch")
    a.ret(errno_action(c.REFUSE_ARCH))
    a.label("refuse_io_uring")
    a.ret(errno_action(c.REFUSE_IO_URING))
    a.label("refuse_family")
    a.ret(errno_action(c.REFUSE_FAMILY))
    a.label("refuse_raw")
    a.ret(errno_action(c.REFUSE_RAW))
    a.label("refuse_protocol")
    a.ret(errno_action(c.REFUSE_PROTOCOL))
    a.label("refuse_join")
    a.ret(errno_action(c.REFUSE_MULTICAST_JOIN))
    a.label("fake_success")
    a.ret(errno_action(0))
    return a.assemble()


def pack(program: list[Instruction]) -> bytes:
    """struct sock_filter[] as the kernel reads it."""
    return b"".join(struct.pack("<HBBI", *instruction) for instruction in program)


def run(program: list[Instruction], data: bytes) -> int:
    """Evaluate the program against a struct seccomp_data, as the kernel would (for tests)."""
    accumulator = 0
    pc = 0
    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code == LD_W_ABS:
            (accumulator,) = struct.unpack_from("<I", data, k)
        elif code == ALU_AND_K:
            accumulator &= k
        elif code == JMP_JA:
            pc += k
        elif code in (JMP_JEQ_K, JMP_JGE_K, JMP_JSET_K):
            if code == JMP_JEQ_K:
                taken = accumulator == k
            elif code == JMP_JGE_K:
                taken = accumulator >= k
            else:
                taken = bool(accumulator & k)
            pc += jt if taken else jf
        elif code == RET_K:
            return k
        else:
            raise ValueError(f"unknown opcode {code:#x}")


def seccomp_data(nr: int, args: tuple[int, ...] = (), arch: int = c.AUDIT_ARCH_X86_64) -> bytes:
    """A struct seccomp_data for `run` (64-bit arguments, zero-padded to six)."""
    values = [value & 0xFFFFFFFFFFFFFFFF for value in args] + [0] * (6 - len(args))
    return struct.pack("<iIQ6Q", nr, arch, 0, *values)
