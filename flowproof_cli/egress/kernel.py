"""ctypes bindings to the few syscalls the supervisor needs (Linux, x86_64).

Every call releases the GIL (ctypes.CDLL), returns a value or raises OSError with the errno.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import threading
from dataclasses import dataclass
from typing import Any

from flowproof_cli.egress import constants as c

_libc = ctypes.CDLL(None, use_errno=True)


def _bind(name: str, restype: type, *argtypes: object) -> Any:
    """A libc function with its C signature declared."""
    function = getattr(_libc, name)
    function.restype = restype
    if argtypes:
        function.argtypes = argtypes
    return function


class IOVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


class MsgHdr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(IOVec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


_int, _uint32, _ulong, _size = ctypes.c_int, ctypes.c_uint32, ctypes.c_ulong, ctypes.c_size_t
_iovecs = ctypes.POINTER(IOVec)
_syscall = _bind("syscall", ctypes.c_long)
_ioctl = _bind("ioctl", _int, _int, _ulong, ctypes.c_void_p)
_prctl = _bind("prctl", _int, _int, _ulong, _ulong, _ulong, _ulong)
_process_vm_readv = _bind(
    "process_vm_readv", ctypes.c_ssize_t, _int, _iovecs, _ulong, _iovecs, _ulong, _ulong
)
_process_vm_writev = _bind(
    "process_vm_writev", ctypes.c_ssize_t, _int, _iovecs, _ulong, _iovecs, _ulong, _ulong
)
_connect = _bind("connect", _int, _int, ctypes.c_char_p, _uint32)
_listen = _bind("listen", _int, _int, _int)
_shutdown = _bind("shutdown", _int, _int, _int)
_sendto = _bind(
    "sendto", ctypes.c_ssize_t, _int, ctypes.c_char_p, _size, _int, ctypes.c_char_p, _uint32
)
_sendmsg = _bind("sendmsg", ctypes.c_ssize_t, _int, ctypes.POINTER(MsgHdr), _int)
_getsockname = _bind("getsockname", _int, _int, ctypes.c_void_p, ctypes.POINTER(_uint32))
_getsockopt = _bind("getsockopt", _int, _int, _int, _int, ctypes.c_void_p, ctypes.POINTER(_uint32))
SOL_SOCKET = 1
SO_TYPE = 3
SO_PROTOCOL = 38
SO_DOMAIN = 39


def _check(result: int) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    return result


def syscall(number: int, *args: int) -> int:
    return _check(_syscall(ctypes.c_long(number), *(ctypes.c_long(arg) for arg in args)))


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    return _check(_prctl(option, arg2, arg3, arg4, arg5))


def pidfd_getfd(pidfd: int, target_fd: int) -> int:
    return syscall(c.NR["pidfd_getfd"], pidfd, target_fd, 0)


_pidfd_thread = True  # False once the kernel refused PIDFD_THREAD: never ask it again


def open_thread_pidfd(tid: int) -> int:
    """A pidfd for the thread that made the call (notification pids are thread ids)."""
    global _pidfd_thread  # noqa: PLW0603 (a per-kernel fact, learnt once)
    if _pidfd_thread:
        try:
            return os.pidfd_open(tid, c.PIDFD_THREAD)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            _pidfd_thread = False
    # Kernel without PIDFD_THREAD (< 6.9): a thread-group leader works as is; a non-leader's
    # descriptor table is its leader's.
    try:
        return os.pidfd_open(tid)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    with open(f"/proc/{tid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Tgid:"):
                return os.pidfd_open(int(line.split()[1]))
    raise OSError(errno.ESRCH, "no thread group")


def read_memory(pid: int, address: int, length: int) -> bytes:
    """Copy `length` bytes from another process; a short read raises EFAULT."""
    if length == 0:
        return b""
    buffer = ctypes.create_string_buffer(length)
    local = IOVec(ctypes.cast(buffer, ctypes.c_void_p), length)
    remote = IOVec(address, length)
    got = _check(_process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    if got != length:
        raise OSError(errno.EFAULT, "short read")
    return buffer.raw


def read_string(pid: int, address: int, limit: int = 4096) -> bytes:
    """A NUL-terminated string, read page by page (a path may end just before unmapped memory)."""
    if address == 0:
        raise OSError(errno.EFAULT, "NULL")
    out = b""
    while len(out) < limit:
        chunk = min(4096 - (address % 4096), limit - len(out))
        data = read_memory(pid, address, chunk)
        end = data.find(b"\0")
        if end >= 0:
            return out + data[:end]
        out += data
        address += chunk
    raise OSError(errno.ENAMETOOLONG, "path too long")


def write_memory(pid: int, address: int, data: bytes) -> None:
    buffer = ctypes.create_string_buffer(data, len(data))
    local = IOVec(ctypes.cast(buffer, ctypes.c_void_p), len(data))
    remote = IOVec(address, len(data))
    got = _check(_process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    if got != len(data):
        raise OSError(errno.EFAULT, "short write")


# --- the notification interface ------------------------------------------------------------


@dataclass(frozen=True)
class Notification:
    id: int
    pid: int  # a thread id
    nr: int
    arch: int
    args: tuple[int, ...]

    def arg_int(self, index: int) -> int:
        """An argument the kernel reads as a C int (fd, flags, length as int)."""
        value = self.args[index] & 0xFFFFFFFF
        return value - (1 << 32) if value >= 1 << 31 else value


_NOTIF = struct.Struct("<QII iIQ6Q")
_RESP = struct.Struct("<QqiI")


def notif_sizes() -> tuple[int, int, int]:
    sizes = ctypes.create_string_buffer(6)
    syscall(c.NR["seccomp"], c.SECCOMP_GET_NOTIF_SIZES, 0, ctypes.addressof(sizes))
    notif, resp, data = struct.unpack("<HHH", sizes.raw)
    return notif, resp, data


class Listener:
    """The supervisor's end of a seccomp user-notification filter (thread-safe: each thread
    answers through buffers of its own)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        notif, resp, _ = notif_sizes()
        self._recv = ctypes.create_string_buffer(max(notif, c.NOTIF_SIZE))
        self._recv_address = ctypes.addressof(self._recv)
        self._resp_size = max(resp, c.NOTIF_RESP_SIZE)
        self._local = threading.local()

    def _buffers(self) -> tuple[ctypes.Array[ctypes.c_char], int, ctypes.c_uint64, int]:
        local = self._local
        if not hasattr(local, "resp"):
            local.resp = ctypes.create_string_buffer(self._resp_size)
            local.resp_address = ctypes.addressof(local.resp)
            local.id = ctypes.c_uint64(0)
            local.id_address = ctypes.addressof(local.id)
        return local.resp, local.resp_address, local.id, local.id_address

    def receive(self) -> Notification:
        """One pending notification (call after poll() reported the fd readable)."""
        ctypes.memset(self._recv_address, 0, len(self._recv))
        _check(_ioctl(self.fd, c.SECCOMP_IOCTL_NOTIF_RECV, self._recv_address))
        notif_id, pid, _flags, nr, arch, _ip, *args = _NOTIF.unpack_from(self._recv)
        return Notification(notif_id, pid, nr, arch, tuple(args))

    def id_valid(self, notif_id: int) -> bool:
        _, _, value, address = self._buffers()
        value.value = notif_id
        return _ioctl(self.fd, c.SECCOMP_IOCTL_NOTIF_ID_VALID, address) == 0

    def respond(self, notif_id: int, *, value: int = 0, error: int = 0, cont: bool = False) -> bool:
        """Answer a notification; False when the caller is gone (killed, interrupted)."""
        buffer, address, _, _ = self._buffers()
        flags = c.SECCOMP_USER_NOTIF_FLAG_CONTINUE if cont else 0
        _RESP.pack_into(buffer, 0, notif_id, value, -error if error else 0, flags)
        return _ioctl(self.fd, c.SECCOMP_IOCTL_NOTIF_SEND, address) == 0


# --- socket operations on a duplicated descriptor ----------------------------------------


def connect(fd: int, address: bytes) -> int:
    """connect(2) with raw sockaddr bytes; returns 0 or the errno."""
    if _connect(fd, address, len(address)) == 0:
        return 0
    return ctypes.get_errno()


def listen(fd: int, backlog: int) -> int:
    return 0 if _listen(fd, backlog) == 0 else ctypes.get_errno()


def _sent(sent: int) -> tuple[int, int]:
    return (sent, 0) if sent >= 0 else (-1, ctypes.get_errno())


def sendto(fd: int, data: bytes, flags: int, address: bytes) -> tuple[int, int]:
    """(bytes sent, 0) or (-1, errno)."""
    return _sent(_sendto(fd, data, len(data), flags, address, len(address)))


def sendmsg(
    fd: int, name: bytes | None, data: bytes, control: bytes, flags: int
) -> tuple[int, int]:
    """sendmsg(2) with one iovec carrying the gathered payload; (sent, 0) or (-1, errno)."""
    payload = ctypes.create_string_buffer(data, max(len(data), 1))
    iov = IOVec(ctypes.cast(payload, ctypes.c_void_p), len(data))
    name_buffer = ctypes.create_string_buffer(name, len(name)) if name else None
    control_buffer = ctypes.create_string_buffer(control, len(control)) if control else None
    header = MsgHdr(
        ctypes.cast(name_buffer, ctypes.c_void_p) if name_buffer is not None else None,
        len(name) if name else 0,
        ctypes.pointer(iov),
        1,
        ctypes.cast(control_buffer, ctypes.c_void_p) if control_buffer is not None else None,
        len(control),
        0,
    )
    return _sent(_sendmsg(fd, ctypes.byref(header), flags))


def getsockname(fd: int) -> bytes:
    buffer = ctypes.create_string_buffer(128)
    length = ctypes.c_uint32(128)
    _check(_getsockname(fd, ctypes.addressof(buffer), ctypes.byref(length)))
    return buffer.raw[: min(length.value, 128)]


def getsockopt_int(fd: int, level: int, option: int) -> int:
    value = ctypes.c_int(0)
    length = ctypes.c_uint32(ctypes.sizeof(value))
    _check(_getsockopt(fd, level, option, ctypes.addressof(value), ctypes.byref(length)))
    return value.value


def shutdown(fd: int) -> None:
    """shutdown(SHUT_RDWR), ignoring errors: used to abort a connect still in progress."""
    _shutdown(fd, 2)
