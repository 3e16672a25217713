"""A classic BPF interpreter for seccomp programs (the opcodes libseccomp emits), so the
filter's unit tests run the compiled program against a struct seccomp_data with no kernel."""

from __future__ import annotations

import struct

from flowproof_cli.egress import constants as c

# Classic BPF opcodes.
LD_W_ABS = 0x20
JMP_JA = 0x05
JMP_JEQ_K = 0x15
JMP_JGT_K = 0x25
JMP_JGE_K = 0x35
JMP_JSET_K = 0x45
ALU_AND_K = 0x54
RET_K = 0x06

Instruction = tuple[int, int, int, int]  # code, jt, jf, k
_CONDITIONS = {
    JMP_JEQ_K: lambda a, k: a == k,
    JMP_JGT_K: lambda a, k: a > k,
    JMP_JGE_K: lambda a, k: a >= k,
    JMP_JSET_K: lambda a, k: bool(a & k),
}


def unpack(program: bytes) -> list[Instruction]:
    """struct sock_filter[] as the kernel reads it, one tuple per instruction."""
    return [struct.unpack_from("<HBBI", program, offset) for offset in range(0, len(program), 8)]


def run(program: list[Instruction], data: bytes) -> int:
    """Evaluate the program against a struct seccomp_data, as the kernel would."""
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
        elif code in _CONDITIONS:
            pc += jt if _CONDITIONS[code](accumulator, k) else jf
        elif code == RET_K:
            return k
        else:
            raise ValueError(f"unknown opcode {code:#x}")


def seccomp_data(nr: int, args: tuple[int, ...] = (), arch: int = c.AUDIT_ARCH_X86_64) -> bytes:
    """A struct seccomp_data for `run` (64-bit arguments, zero-padded to six)."""
    values = [value & 0xFFFFFFFFFFFFFFFF for value in args] + [0] * (6 - len(args))
    return struct.pack("<iIQ6Q", nr, arch, 0, *values)
