"""Kernel numbers the filter and the supervisor need (x86_64; uapi headers, Linux >= 5.19).

Only the native architecture is supervised: every foreign-architecture (i386 `int 0x80`) and
x32 syscall is refused by the filter itself, so one table is all the supervisor reads.
"""

from __future__ import annotations

import errno
import os

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

# Syscall numbers, x86_64.
NR: dict[str, int] = {
    "open": 2,
    "socket": 41,
    "connect": 42,
    "sendto": 44,
    "sendmsg": 46,
    "listen": 50,
    "setsockopt": 54,
    "truncate": 76,
    "ftruncate": 77,
    "rename": 82,
    "rmdir": 84,
    "creat": 85,
    "unlink": 87,
    "prctl": 157,
    "openat": 257,
    "unlinkat": 263,
    "renameat": 264,
    "sendmmsg": 307,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "renameat2": 316,
    "seccomp": 317,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "pidfd_open": 434,
    "openat2": 437,
    "pidfd_getfd": 438,
}
NAME_OF: dict[int, str] = {number: name for name, number in NR.items()}

NETWORK_TRAPS = ("connect", "sendto", "sendmsg", "sendmmsg", "listen")
FS_TRAPS = (
    "unlink",
    "unlinkat",
    "rmdir",
    "rename",
    "renameat",
    "renameat2",
    "truncate",
    "ftruncate",
    "creat",
    "openat2",
    "open",
    "openat",
)

# Address families.
AF_UNSPEC = 0
AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
AF_NETLINK = 16
AF_PACKET = 17
AF_ALG = 38
AF_VSOCK = 40
#: socket() families the filter lets through; every other family (packet, vsock, xdp, tipc,
#: rds, bluetooth, can, ...) is refused with EAFNOSUPPORT before a socket exists.
ALLOWED_FAMILIES = (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_ALG)

SOCK_STREAM = 1
SOCK_DGRAM = 2
SOCK_RAW = 3
SOCK_PACKET = 10
SOCK_TYPE_MASK = 0xF

IPPROTO_IP = 0
IPPROTO_TCP = 6
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41
IPPROTO_SCTP = 132  # sctp_connectx is a setsockopt: a connect the filter would never see
IPPROTO_MPTCP = 262  # extra subflows go to addresses the peer announces, unchecked

#: setsockopt options that join a multicast group (the kernel then sends IGMP/MLD reports).
MULTICAST_JOIN_V4 = (35, 39, 42, 46)  # IP_ADD_MEMBERSHIP, IP_ADD_SOURCE_MEMBERSHIP, MCAST_JOIN_*
MULTICAST_JOIN_V6 = (20, 42, 46)  # IPV6_ADD_MEMBERSHIP, MCAST_JOIN_GROUP, MCAST_JOIN_SOURCE_GROUP
#: setsockopt options that choose the outgoing interface, by (level, options). Loopback is
#: exempt by address, and 127.0.0.1 sent out of veth0 leaves the host: refused in-kernel.
SOL_SOCKET = 1
INTERFACE_CHOICE: tuple[tuple[int, tuple[int, ...]], ...] = (
    (SOL_SOCKET, (25, 62)),  # SO_BINDTODEVICE, SO_BINDTOIFINDEX
    (IPPROTO_IP, (50,)),  # IP_UNICAST_IF
    (IPPROTO_IPV6, (76,)),  # IPV6_UNICAST_IF
)
#: Control messages of a send naming its outgoing interface (checked by the supervisor).
IP_PKTINFO = 8
IPV6_PKTINFO = 50
IPV6_2292PKTINFO = 2
LOOPBACK_IFINDEX = 1  # lo is interface 1 in every network namespace

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
PR_SET_NO_NEW_PRIVS = 38

O_ACCMODE = 0o3
O_TRUNC = 0o1000
AT_FDCWD = -100
AT_REMOVEDIR = 0x200
OPEN_FLAG_NAMES = (
    (0o100, "O_CREAT"),
    (0o200, "O_EXCL"),
    (0o1000, "O_TRUNC"),
    (0o2000, "O_APPEND"),
    (0o200000, "O_DIRECTORY"),
    (0o400000, "O_NOFOLLOW"),
    (0o20000000, "O_TMPFILE"),
)

# seccomp(2) and the user-notification interface.
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_GET_NOTIF_SIZES = 3
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV = 1 << 5
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_USER_NOTIF = 0x7FC00000
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1
SECCOMP_IOCTL_NOTIF_RECV = 0xC0502100
SECCOMP_IOCTL_NOTIF_SEND = 0xC0182101
SECCOMP_IOCTL_NOTIF_ID_VALID = 0x40082102
NOTIF_SIZE = 80  # struct seccomp_notif
NOTIF_RESP_SIZE = 24  # struct seccomp_notif_resp

PIDFD_THREAD = os.O_EXCL

#: errno values the filter returns for what it refuses in-kernel.
REFUSE_ARCH = errno.EPERM  # i386 `int 0x80` and x32
REFUSE_IO_URING = errno.EPERM
REFUSE_FAMILY = errno.EAFNOSUPPORT  # AF_PACKET, AF_VSOCK, and every family not allowed
REFUSE_RAW = errno.EPERM  # SOCK_RAW / SOCK_PACKET on AF_INET(6)
REFUSE_PROTOCOL = errno.EPROTONOSUPPORT  # SCTP, MPTCP
REFUSE_MULTICAST_JOIN = errno.EPERM
REFUSE_INTERFACE_CHOICE = errno.EPERM
#: errno the supervisor answers with.
DENY_CONNECT = errno.ECONNREFUSED
DENY_SEND = errno.ECONNREFUSED
DENY_LISTEN = errno.EPERM

#: Capabilities removed from a privileged agent: each reaches the supervisor (ptrace) or the
#: network (interfaces, tun devices, bpf, modules) without a syscall the filter examines.
DROPPED_CAPABILITIES = {
    "CAP_NET_ADMIN": 12,
    "CAP_SYS_MODULE": 16,
    "CAP_SYS_PTRACE": 19,
    "CAP_BPF": 39,
}
