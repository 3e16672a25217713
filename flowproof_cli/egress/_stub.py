"""Runs in the agent's process before the agent: install the filter, hand over the listener.

Started as `python -I -S _stub.py STATUS_FD ACK_FD FILTER_HEX DROP_CAPS -- ARGV...` and then
replaced by the agent through execve, so the agent keeps this process's pid (and process
group). Standalone on purpose: it imports nothing of flowproof and runs in a fresh
interpreter, so no lock or thread of the parent can be inherited half-taken.

Protocol on STATUS_FD:  "OK <pid> <listener fd> <dropped caps>\n" | "ERR <errno> <text>\n",
then, after the parent answers on ACK_FD ("G" go, "X" abort), execve; a failed execve writes
"EXEC <errno>\n" (a successful one closes STATUS_FD, which is close-on-exec by then).
"""

import ctypes
import os
import struct
import sys

SYS_SECCOMP = 317
SYS_CAPGET = 125
SYS_CAPSET = 126
SECCOMP_SET_MODE_FILTER = 1
FLAGS = (1 << 3) | (1 << 5)  # NEW_LISTENER | WAIT_KILLABLE_RECV
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_LOWER = 3
CAPS = {"CAP_NET_ADMIN": 12, "CAP_SYS_MODULE": 16, "CAP_SYS_PTRACE": 19, "CAP_BPF": 39}

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    return libc.prctl(option, arg2, arg3, 0, 0)


def drop_capabilities() -> list[str]:
    """Remove what reaches the supervisor or the network without a trapped syscall."""
    header = ctypes.create_string_buffer(struct.pack("<Ii", 0x20080522, 0))
    data = ctypes.create_string_buffer(24)
    if libc.syscall(ctypes.c_long(SYS_CAPGET), header, data) != 0:
        return []
    words = list(struct.unpack("<6I", data.raw))  # (eff, perm, inh) x 2
    dropped = []
    for name, bit in CAPS.items():
        index, mask = (bit // 32) * 3, 1 << (bit % 32)
        if words[index + 1] & mask:
            dropped.append(name)
        prctl(PR_CAPBSET_DROP, bit)
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, bit)
        for offset in range(3):
            words[index + offset] &= ~mask
    data = ctypes.create_string_buffer(struct.pack("<6I", *words))
    libc.syscall(ctypes.c_long(SYS_CAPSET), header, data)
    return dropped


def main() -> None:
    status_text, ack_text, program_hex, drop = sys.argv[1:5]
    status_fd, ack_fd = int(status_text), int(ack_text)
    argv = sys.argv[6:]
    dropped = drop_capabilities() if drop == "1" else []
    program = bytes.fromhex(program_hex)
    filters = ctypes.create_string_buffer(program, len(program))
    fprog = ctypes.create_string_buffer(
        struct.pack("<HxxxxxxQ", len(program) // 8, ctypes.addressof(filters))
    )
    prctl(PR_SET_DUMPABLE, 1)  # the supervisor reads this process's memory
    listener = -1
    if prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        number = ctypes.get_errno()
        status = f"ERR {number} no_new_privs: {os.strerror(number)}\n"
    else:
        listener = libc.syscall(
            ctypes.c_long(SYS_SECCOMP),
            ctypes.c_long(SECCOMP_SET_MODE_FILTER),
            ctypes.c_long(FLAGS),
            fprog,
        )
        if listener < 0:
            number = ctypes.get_errno()
            status = f"ERR {number} seccomp: {os.strerror(number)}\n"
        else:
            status = f"OK {os.getpid()} {listener} {','.join(dropped) or '-'}\n"
    os.write(status_fd, status.encode())
    answer = os.read(ack_fd, 1)
    if listener >= 0:
        os.close(listener)
    os.close(ack_fd)
    if answer != b"G":
        os._exit(125)
    os.set_inheritable(status_fd, False)
    try:
        os.execvp(argv[0], argv)  # noqa: S606 (argv is the agent's own command line)
    except OSError as exc:
        os.write(status_fd, f"EXEC {exc.errno}\n".encode())
    os._exit(127)


main()
