"""A hostile agent: one escape technique per case, each reporting the exact errno it got.

Run only by tests/egress/lab.py, inside a network namespace the test created. Prints
`RESULT {json}` on stdout. It uses ctypes for the raw syscalls so that Python's own retry
and EINTR handling never hides what the kernel answered.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.connect.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
libc.sendto.argtypes = (
    ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32,
)  # fmt: skip
libc.sendto.restype = ctypes.c_ssize_t
libc.send.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
libc.send.restype = ctypes.c_ssize_t
libc.write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
libc.write.restype = ctypes.c_ssize_t

CTX: dict = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
MSG_FASTOPEN = 0x20000000
NR_CONNECT, NR_PIDFD_OPEN, NR_PIDFD_GETFD, NR_IO_URING_SETUP = 42, 434, 438, 425
NR_SETSOCKOPT = 54
X32 = 0x40000000
SO_BINDTODEVICE, SO_BINDTOIFINDEX, IP_UNICAST_IF, IPV6_UNICAST_IF = 25, 62, 50, 76


def name(number: int) -> str:
    return errno.errorcode.get(number, str(number)) if number else "OK"


def sockaddr(host: str, port: int, family: int | None = None) -> bytes:
    if ":" in host:
        packed = socket.inet_pton(socket.AF_INET6, host)
        return struct.pack("<H", socket.AF_INET6) + struct.pack(">HI", port, 0) + packed + bytes(4)
    fam = socket.AF_INET if family is None else family
    return struct.pack("<H", fam) + struct.pack(">H", port) + socket.inet_aton(host) + bytes(8)


def c_connect(fd: int, raw: bytes) -> str:
    """connect(2) as the kernel answers it; SO_SNDTIMEO bounds a connect nobody answers (an
    uncontained control run), which then reports EINPROGRESS after the SYN left."""
    timeval = struct.pack("<qq", 1, 0)
    libc.setsockopt(fd, socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval, len(timeval))
    ok = libc.connect(fd, raw, len(raw))
    return "OK" if ok == 0 else name(ctypes.get_errno())


def syscall(number: int, *args: int) -> str:
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    return "OK" if result >= 0 else name(ctypes.get_errno())


def syscall_value(number: int, *args: int) -> int | str:
    """The return value, or the errno name."""
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    return result if result >= 0 else name(ctypes.get_errno())


def connect_to(host: str, port: int, family: int = socket.AF_INET) -> str:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        return c_connect(sock.fileno(), sockaddr(host, port))


def exchange(sock: socket.socket) -> str:
    sock.settimeout(5)
    sock.sendall(b"ping")
    return sock.recv(100).decode()


def local() -> tuple[str, int]:
    return "127.0.0.1", CTX["local_tcp"]


# --- escape techniques ------------------------------------------------------------------------


def case_connect_v4() -> dict:
    return {
        "offhost": connect_to(CTX["offhost4"], 80),
        "peer_undeclared_port": connect_to(CTX["peer4"], 8080),
    }


def case_connect_v6() -> dict:
    return {
        "offhost": connect_to(CTX["offhost6"], 80, socket.AF_INET6),
        "peer_undeclared": connect_to(CTX["peer6"], 8080, socket.AF_INET6),
    }


def case_connect_v4mapped() -> dict:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        offhost = c_connect(sock.fileno(), sockaddr("::ffff:" + CTX["offhost4"], 80))
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        mapped_loopback = c_connect(sock.fileno(), sockaddr("::ffff:127.0.0.1", CTX["local_tcp"]))
    return {"offhost": offhost, "mapped_loopback": mapped_loopback}


def case_connect_any() -> dict:
    """0.0.0.0 and :: connect to this host (the kernel routes them to loopback)."""
    with socket.socket() as sock:
        any4 = c_connect(sock.fileno(), sockaddr("0.0.0.0", CTX["local_tcp"]))
        reply = exchange(sock) if any4 == "OK" else ""
    with socket.socket(socket.AF_INET6) as sock:
        any6 = c_connect(sock.fileno(), sockaddr("::", CTX["local_tcp6"]))
    with socket.socket() as sock:  # bound to the veth address: still delivered locally
        sock.bind(("10.77.0.1", 0))
        bound = c_connect(sock.fileno(), sockaddr("0.0.0.0", 9))
    return {"any4": any4, "reply": reply, "any6": any6, "bound_unused_port": bound}


#: A DNS query for registry.npmjs.org (type A), as glibc's resolver sends it.
DNS_QUERY = (
    b"\xfc\xc5\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    b"\x08registry\x05npmjs\x03org\x00\x00\x01\x00\x01"
)


def case_udp_sendto() -> dict:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        raw = sockaddr(CTX["offhost4"], 9)
        sent = libc.sendto(sock.fileno(), b"x" * 10, 10, 0, raw, len(raw))
        offhost = "OK" if sent >= 0 else name(ctypes.get_errno())
        raw = sockaddr(CTX["offhost4"], 53)
        sent = libc.sendto(sock.fileno(), DNS_QUERY, len(DNS_QUERY), 0, raw, len(raw))
        dns = "OK" if sent >= 0 else name(ctypes.get_errno())
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
        raw = sockaddr(CTX["offhost6"], 9)
        sent = libc.sendto(sock.fileno(), b"x", 1, 0, raw, len(raw))
        offhost6 = "OK" if sent >= 0 else name(ctypes.get_errno())
    return {"offhost": offhost, "dns": dns, "offhost6": offhost6}


def case_udp_unspec() -> dict:
    """udp_sendmsg reads an AF_UNSPEC sockaddr as AF_INET (BSD compatibility)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        raw = sockaddr(CTX["offhost4"], 9, family=socket.AF_UNSPEC)
        sent = libc.sendto(sock.fileno(), b"x" * 10, 10, 0, raw, len(raw))
        return {"unspec": "OK" if sent >= 0 else name(ctypes.get_errno())}


def case_sendmsg_name() -> dict:
    """msg_name overrides the peer of a connected UDP socket (connected to a declared one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((CTX["peer4"], 8081))
        sock.settimeout(5)
        connected_send = "OK" if sock.send(b"hello") == 5 else "short"
        sock.recv(100)  # take the echo: a closed port would answer it with an ICMP error
        try:
            sock.sendmsg([b"exfil"], [], 0, (CTX["offhost4"], 9))
            redirected = "OK"
        except OSError as exc:
            redirected = name(exc.errno or 0)
    return {"connected_send": connected_send, "redirected": redirected}


class MsgHdr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.c_void_p),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


class MMsgHdr(ctypes.Structure):
    _fields_ = (("hdr", MsgHdr), ("len", ctypes.c_uint))


class IOVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


def case_sendmmsg() -> dict:
    keep = []
    vector = (MMsgHdr * 2)()
    for index, host, port in ((0, "127.0.0.1", CTX["local_udp"]), (1, CTX["offhost4"], 9)):
        raw = ctypes.create_string_buffer(sockaddr(host, port), 16)
        payload = ctypes.create_string_buffer(b"mmsg", 4)
        iov = IOVec(ctypes.cast(payload, ctypes.c_void_p), 4)
        keep += [raw, payload, iov]
        vector[index].hdr = MsgHdr(
            ctypes.cast(raw, ctypes.c_void_p), 16, ctypes.addressof(iov), 1, None, 0, 0
        )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        mixed = syscall(307, sock.fileno(), ctypes.addressof(vector), 2, 0)
        local_only = syscall_value(307, sock.fileno(), ctypes.addressof(vector), 1, 0)
    return {"mixed": mixed, "local_only": local_only, "msg_len": vector[0].len}


def case_fastopen() -> dict:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("<qq", 1, 0))
        raw = sockaddr(CTX["offhost4"], 80)
        sent = libc.sendto(sock.fileno(), b"GET /", 5, MSG_FASTOPEN, raw, len(raw))
        return {"fastopen": "OK" if sent >= 0 else name(ctypes.get_errno())}


def case_io_uring() -> dict:
    params = ctypes.create_string_buffer(120)
    return {"io_uring_setup": syscall(NR_IO_URING_SETUP, 8, ctypes.addressof(params))}


def _socket(family: int, kind: int, protocol: int = 0) -> str:
    fd = libc.socket(family, kind, protocol)
    if fd < 0:
        return name(ctypes.get_errno())
    os.close(fd)
    return "OK"


def case_af_packet() -> dict:
    return {
        "packet_raw": _socket(17, socket.SOCK_RAW, socket.htons(3)),
        "packet_dgram": _socket(17, socket.SOCK_DGRAM, socket.htons(3)),
    }


def case_raw_socket() -> dict:
    return {
        "raw4": _socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
        "raw6": _socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
        "raw4_nonblock": _socket(socket.AF_INET, socket.SOCK_RAW | socket.SOCK_NONBLOCK, 255),
        "sctp": _socket(socket.AF_INET, socket.SOCK_STREAM, 132),
        "tcp_still_fine": _socket(socket.AF_INET, socket.SOCK_STREAM),
    }


def case_vsock() -> dict:
    """Only socket(): AF_VSOCK reaches the hypervisor, which no test may ever touch."""
    return {"vsock": _socket(40, socket.SOCK_STREAM)}


def case_multicast_join() -> dict:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = socket.inet_aton("239.1.2.3") + socket.inet_aton("10.77.0.1")
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, request)
            join = "OK"
        except OSError as exc:
            join = name(exc.errno or 0)
    return {"join": join}


def _helper(*args: str) -> dict:
    output = subprocess.run([CTX["helper"], *args], capture_output=True, text=True, check=False)
    return (
        json.loads(output.stdout) if output.stdout.strip() else {"helper_exit": output.returncode}
    )


def case_int80() -> dict:
    return _helper("int80", CTX["offhost4"], "80")


def case_x32() -> dict:
    raw = sockaddr(CTX["offhost4"], 80)
    with socket.socket() as sock:
        buffer = ctypes.create_string_buffer(raw, len(raw))
        return {
            "x32_connect": syscall(X32 | NR_CONNECT, sock.fileno(), ctypes.addressof(buffer), 16)
        }


def case_thread() -> dict:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(thread=connect_to(CTX["offhost4"], 80)))
    thread.start()
    thread.join()
    return out


def case_fork() -> dict:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write_end, connect_to(CTX["offhost4"], 80).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return {"forked": os.read(read_end, 100).decode()}


def case_vfork() -> dict:
    return _helper("vfork", CTX["offhost4"], "80")


def case_exec() -> dict:
    code = (
        "import socket,struct;s=socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack('<qq', 1, 0))\n"
        "try:\n s.connect(({!r}, 80)); print('OK')\n"
        "except OSError as e: print(__import__('errno').errorcode[e.errno])"
    ).format(CTX["offhost4"])
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    grandchild = subprocess.run(
        ["/bin/sh", "-c", f'exec "{sys.executable}" -c "$0"', code],
        capture_output=True,
        text=True,
        check=False,
    )
    return {"exec_child": child.stdout.strip(), "exec_grandchild": grandchild.stdout.strip()}


def case_race_sockaddr() -> dict:
    """A sibling rewrites the sockaddr between loopback and an undeclared peer while the
    supervisor decides; the peer must never see a connection."""
    allowed = sockaddr("127.0.0.1", CTX["local_tcp"])
    undeclared = sockaddr(CTX["peer4"], 8080)
    buffer = ctypes.create_string_buffer(allowed, 16)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            ctypes.memmove(buffer, undeclared, 16)
            ctypes.memmove(buffer, allowed, 16)

    threads = [threading.Thread(target=flip) for _ in range(2)]
    for thread in threads:
        thread.start()
    outcomes: dict[str, int] = {}
    for _ in range(CTX.get("iterations", 2000)):
        fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
        result = "OK" if libc.connect(fd, buffer, 16) == 0 else name(ctypes.get_errno())
        outcomes[result] = outcomes.get(result, 0) + 1
        os.close(fd)
    stop.set()
    for thread in threads:
        thread.join()
    return {"outcomes": outcomes}


def case_dup2_swap() -> dict:
    """A sibling swaps another socket onto the descriptor number during the call."""
    unix_raw = struct.pack("<H", socket.AF_UNIX) + CTX["unix"].encode() + b"\0"
    peer_raw = sockaddr(CTX["peer4"], 8081)
    stop = threading.Event()
    outcomes: dict[str, int] = {}
    target = os.dup(0)
    inet_tcp = socket.socket()
    inet_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def swap() -> None:
        while not stop.is_set():
            os.dup2(inet_tcp.fileno(), target)
            os.dup2(inet_udp.fileno(), target)

    thread = threading.Thread(target=swap)
    thread.start()
    for index in range(CTX.get("iterations", 1000)):
        unix = socket.socket(socket.AF_UNIX)
        os.dup2(unix.fileno(), target)
        if index % 2:
            ok = libc.connect(target, unix_raw, len(unix_raw)) == 0
        else:  # the destination is declared, but only as a TCP (fast open) destination
            ok = libc.sendto(target, b"x", 1, MSG_FASTOPEN, peer_raw, len(peer_raw)) >= 0
        result = "OK" if ok else name(ctypes.get_errno())
        outcomes[result] = outcomes.get(result, 0) + 1
        unix.close()
    stop.set()
    thread.join()
    return {"outcomes": outcomes}


def case_steal_listener() -> dict:
    """Take the supervisor's listener out of the parent and answer our own notifications."""
    parent = os.getppid()
    pidfd = libc.syscall(ctypes.c_long(NR_PIDFD_OPEN), ctypes.c_long(parent), ctypes.c_long(0))
    stolen: dict[str, int] = {}
    for fd in range(0, 64):
        result = syscall(NR_PIDFD_GETFD, pidfd, fd, 0)
        stolen[result] = stolen.get(result, 0) + 1
    proc_fd: dict[str, int] = {}
    for fd in range(0, 64):
        try:
            os.close(os.open(f"/proc/{parent}/fd/{fd}", os.O_RDONLY))
            result = "OK"
        except OSError as exc:
            result = name(exc.errno or 0)
        proc_fd[result] = proc_fd.get(result, 0) + 1
    ptrace = "OK" if libc.ptrace(16, parent, 0, 0) == 0 else name(ctypes.get_errno())  # ATTACH
    try:
        with open(f"/proc/{parent}/mem", "rb"):
            mem = "OK"
    except OSError as exc:
        mem = name(exc.errno or 0)
    return {
        "pidfd_open": "OK" if pidfd >= 0 else name(ctypes.get_errno()),
        "pidfd_getfd": stolen,
        "proc_fd": proc_fd,
        "ptrace_attach": ptrace,
        "proc_mem": mem,
        "connect_after": connect_to(CTX["offhost4"], 80),
    }


def case_nondumpable() -> dict:
    libc.prctl.restype = ctypes.c_int
    made = libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    return {
        "set_dumpable": "OK" if made == 0 else name(ctypes.get_errno()),
        "dumpable_now": libc.prctl(3, 0, 0, 0, 0),
        "offhost": connect_to(CTX["offhost4"], 80),
        "loopback": connect_to(*local()),
    }


def case_exec_unreadable() -> dict:
    """Exec an execute-only binary: the kernel makes the process non-dumpable."""
    first = _helper("connect", CTX["offhost4"], "80")
    helper = CTX["helper"]
    CTX["helper"] = CTX["helper_execute_only"]
    offhost = _helper("connect", CTX["offhost4"], "80")
    loopback = _helper("connect", "127.0.0.1", str(CTX["local_tcp"]))
    CTX["helper"] = helper
    return {"readable_offhost": first, "unreadable_offhost": offhost, "unreadable_loop": loopback}


def case_signal_storm() -> dict:
    signal.signal(signal.SIGUSR1, lambda *_: None)
    signal.siginterrupt(signal.SIGUSR1, False)  # SA_RESTART, as most runtimes install
    storm = subprocess.Popen(
        [sys.executable, "-c", f"import os\nwhile True: os.kill({os.getpid()}, 10)"]
    )
    time.sleep(0.2)
    allowed = sockaddr(*local())
    denied = sockaddr(CTX["offhost4"], 80)
    outcomes: dict[str, int] = {}
    for index in range(CTX.get("iterations", 400)):
        fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
        kind = "allowed" if index % 2 else "denied"
        raw = allowed if index % 2 else denied
        result = "OK" if libc.connect(fd, raw, 16) == 0 else name(ctypes.get_errno())
        outcomes[f"{kind}:{result}"] = outcomes.get(f"{kind}:{result}", 0) + 1
        os.close(fd)
    storm.kill()
    storm.wait()
    return {"outcomes": outcomes}


def case_kill_supervisor() -> dict:
    parent = os.getppid()
    os.kill(parent, signal.SIGKILL)
    for _ in range(500):
        if os.getppid() != parent:
            break
        time.sleep(0.01)
    time.sleep(0.1)
    return {
        "offhost": connect_to(CTX["offhost4"], 80),
        "loopback": connect_to(*local()),
        "orphaned": os.getppid() != parent,
    }


def _setsockopt(sock: socket.socket, level: int, option: int, value: bytes) -> str:
    try:
        sock.setsockopt(level, option, value)
        return "OK"
    except OSError as exc:
        return name(exc.errno or 0)


def case_bind_to_device() -> dict:
    """Loopback is exempt, but a socket bound to veth0 sends its 127.0.0.1 traffic out of
    veth0: every way to choose the outgoing interface is refused in the filter."""
    veth = socket.if_nametoindex("veth0")
    out = {}
    with socket.socket() as sock:
        out["bindtodevice"] = _setsockopt(sock, socket.SOL_SOCKET, SO_BINDTODEVICE, b"veth0")
        out["tcp_loopback"] = c_connect(sock.fileno(), sockaddr(*local()))
    with socket.socket() as sock:
        out["bindtodevice_lo"] = _setsockopt(sock, socket.SOL_SOCKET, SO_BINDTODEVICE, b"lo")
        out["bindtoifindex"] = _setsockopt(
            sock, socket.SOL_SOCKET, SO_BINDTOIFINDEX, struct.pack("i", veth)
        )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        out["unicast_if"] = _setsockopt(
            sock, socket.IPPROTO_IP, IP_UNICAST_IF, struct.pack(">i", veth)
        )
        raw = sockaddr("127.0.0.1", CTX["local_udp"])
        sent = libc.sendto(sock.fileno(), b"u", 1, 0, raw, len(raw))
        out["udp_loopback"] = "OK" if sent >= 0 else name(ctypes.get_errno())
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
        out["unicast_if6"] = _setsockopt(
            sock, socket.IPPROTO_IPV6, IPV6_UNICAST_IF, struct.pack("i", veth)
        )
    return out


def _pktinfo_send(family: int, info: bytes, to: tuple | None, connect: tuple | None) -> str:
    level, kind = (
        (socket.IPPROTO_IP, socket.IP_PKTINFO)
        if family == socket.AF_INET
        else (socket.IPPROTO_IPV6, socket.IPV6_PKTINFO)
    )
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            if connect is not None:
                sock.connect(connect)
                sock.sendmsg([b"pk"], [(level, kind, info)])
            else:
                sock.sendmsg([b"pk"], [(level, kind, info)], 0, to)
            return "OK"
        except OSError as exc:
            return name(exc.errno or 0)


def case_pktinfo_interface() -> dict:
    """IP_PKTINFO / IPV6_PKTINFO in a send's control data choose the outgoing interface per
    message: a loopback destination sent out of veth0 is refused; out of lo, it is sent."""
    veth, lo = socket.if_nametoindex("veth0"), socket.if_nametoindex("lo")
    target = ("127.0.0.1", CTX["local_udp"])

    def v4(index: int) -> bytes:
        return struct.pack("@i4s4s", index, bytes(4), bytes(4))

    v6 = socket.inet_pton(socket.AF_INET6, "::") + struct.pack("@I", veth)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        raw = sockaddr(*target)
        dontroute = libc.sendto(sock.fileno(), b"d", 1, socket.MSG_DONTROUTE, raw, len(raw))
    return {
        "v4_named": _pktinfo_send(socket.AF_INET, v4(veth), target, None),
        "v4_connected": _pktinfo_send(socket.AF_INET, v4(veth), None, target),
        "v6_named": _pktinfo_send(socket.AF_INET6, v6, ("::1", 9), None),
        "v4_through_lo": _pktinfo_send(socket.AF_INET, v4(lo), target, None),
        "dontroute": "OK" if dontroute >= 0 else name(ctypes.get_errno()),
    }


def case_sendmsg_fastopen() -> dict:
    """sendmsg(MSG_FASTOPEN) connects a TCP socket to msg_name, with data, in one call."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("<qq", 1, 0))
        try:
            sock.sendmsg([b"GET /"], [], MSG_FASTOPEN, (CTX["offhost4"], 80))
            return {"fastopen_sendmsg": "OK"}
        except OSError as exc:
            return {"fastopen_sendmsg": name(exc.errno or 0)}


def case_address_on_connected_stream() -> dict:
    """A TCP socket connected to loopback, then sendto naming an off-host address."""
    with socket.create_connection(local()) as sock:
        raw = sockaddr(CTX["offhost4"], 80)
        sent = libc.sendto(sock.fileno(), b"x", 1, 0, raw, len(raw))
        return {"sendto_offhost": "OK" if sent >= 0 else name(ctypes.get_errno())}


def _udp_send(host: str, port: int, broadcast: bool = False) -> str:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        if broadcast:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        raw = sockaddr(host, port)
        sent = libc.sendto(sock.fileno(), b"x", 1, 0, raw, len(raw))
        return "OK" if sent >= 0 else name(ctypes.get_errno())


def case_special_addresses() -> dict:
    """The cloud metadata address, link-local, broadcast and multicast: all off-host."""
    link_local6 = sockaddr("fe80::2", 80)[:-4] + struct.pack("<I", socket.if_nametoindex("veth0"))
    with socket.socket(socket.AF_INET6) as sock:
        scoped = c_connect(sock.fileno(), link_local6)
    return {
        "metadata": connect_to("169.254.169.254", 80),
        "link_local4": connect_to("169.254.1.1", 80),
        "link_local6_scoped": scoped,
        "broadcast": _udp_send("255.255.255.255", 9, broadcast=True),
        "subnet_broadcast": _udp_send("10.77.0.255", 9, broadcast=True),
        "multicast": _udp_send("239.1.2.3", 9),
        "multicast6": _udp_send("ff02::1", 9),
    }


def case_ipv6_embeddings() -> dict:
    """IPv6 forms that carry an IPv4 address without being v4-mapped: off-host IPv6."""
    host = CTX["offhost4"]
    return {
        form: connect_to(address, 80, socket.AF_INET6)
        for form, address in (
            ("compatible", f"::{host}"),
            ("nat64", f"64:ff9b::{host}"),
            ("translated", f"::ffff:0:{host}"),
            ("6to4", "2002:cb00:7107::1"),
            ("teredo", "2001:0:cb00:7107::1"),
        )
    }


def _raw_connect(fd: int, pointer: int, length: int) -> str:
    return syscall(NR_CONNECT, fd, pointer, length)


def case_malformed_sockaddr() -> dict:
    """Lengths and pointers the kernel rejects: the supervisor answers as the kernel does."""
    good = ctypes.create_string_buffer(sockaddr(CTX["offhost4"], 80), 4096)
    inet6 = ctypes.create_string_buffer(sockaddr(CTX["offhost4"], 80), 28)
    out = {}
    with socket.socket() as sock:
        fd = sock.fileno()
        out["addrlen_4096"] = _raw_connect(fd, ctypes.addressof(good), 4096)
        out["addrlen_0"] = _raw_connect(fd, ctypes.addressof(good), 0)
        out["addrlen_short"] = _raw_connect(fd, ctypes.addressof(good), 8)
        out["addrlen_negative"] = _raw_connect(fd, ctypes.addressof(good), -1)
        out["null"] = _raw_connect(fd, 0, 16)
        out["unmapped"] = _raw_connect(fd, 8, 16)
    with socket.socket(socket.AF_INET6) as sock:  # an AF_INET address on an IPv6 socket
        out["family_mismatch"] = _raw_connect(sock.fileno(), ctypes.addressof(inet6), 16)
    return out


def case_unaddressed_send() -> dict:
    """No address at all (allowed in-kernel): an unconnected socket has nowhere to send."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        refused = connect_to(CTX["offhost4"], 9)
        sent = libc.send(sock.fileno(), b"x", 1, 0)
        unconnected = "OK" if sent >= 0 else name(ctypes.get_errno())
        written = "OK" if libc.write(sock.fileno(), b"x", 1) >= 0 else name(ctypes.get_errno())
    return {"connect_first": refused, "send": unconnected, "write": written}


def case_netlink_route() -> dict:
    """A route to the internet through rtnetlink: the capability it needs is dropped."""
    rtm = struct.pack("=BBBBBBBBI", socket.AF_INET, 0, 0, 0, 254, 3, 0, 1, 0)  # main, boot, unicast
    gateway = struct.pack("=HH4s", 8, 5, socket.inet_aton(CTX["peer4"]))  # RTA_GATEWAY
    body = rtm + gateway
    header = struct.pack("=IHHII", 16 + len(body), 24, 0x405, 1, 0)  # RTM_NEWROUTE, REQ|ACK|CREATE
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as sock:
        sock.settimeout(5)
        sent = libc.send(sock.fileno(), header + body, len(header + body), 0)
        if sent < 0:
            return {"route_add": name(ctypes.get_errno())}
        reply = sock.recv(4096)
    (error,) = struct.unpack_from("=i", reply, 16)  # struct nlmsgerr after the header
    return {"route_add": name(-error)}


def case_interface_choice_high_bits() -> dict:
    """setsockopt's level and name are C ints: garbage in the upper 32 bits changes nothing."""
    device = ctypes.create_string_buffer(b"veth0")
    with socket.socket() as sock:
        level = (0xDEAD << 32) | socket.SOL_SOCKET
        option = (0xBEEF << 32) | SO_BINDTODEVICE
        return {
            "bindtodevice": syscall(
                NR_SETSOCKOPT, sock.fileno(), level, option, ctypes.addressof(device), 6
            ),
            "connect_loopback": c_connect(sock.fileno(), sockaddr(*local())),
        }


def case_noop() -> dict:
    time.sleep(float(CTX.get("sleep", 0)))
    return {}


def case_nested() -> dict:
    """An agent that runs its own user-notification sandbox: the kernel refuses a second
    listener in one process tree (EBUSY), so the inner run is not contained by itself."""
    import site

    site.main()  # started with -S: the inner launch compiles its filter with pyseccomp
    sys.path.insert(0, CTX["repo"])
    from flowproof_cli.egress import Policy
    from tests.egress.contained import run_contained

    inner = run_contained(
        [sys.executable, "-S", __file__, "connect_v4", json.dumps(CTX)],
        Policy(),
        stdout=subprocess.DEVNULL,
    )
    return {
        "inner_tier": inner.report.containment.line,
        "inner_exit": inner.returncode,
        "still_refused_by_outer": connect_to(CTX["offhost4"], 80),
    }


def case_stall() -> dict:
    """One thread's blocking connect to a declared destination that never answers must not
    stall the agent's other connects (the supervisor performs it on a worker)."""
    blocked_result: dict = {}

    def slow() -> None:
        with socket.socket() as sock:
            timeval = struct.pack("<qq", 3, 0)
            libc.setsockopt(sock.fileno(), socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval, 16)
            started = time.monotonic()
            ok = libc.connect(sock.fileno(), sockaddr(CTX["offhost4"], 80), 16) == 0
            blocked_result["slow"] = "OK" if ok else name(ctypes.get_errno())
            blocked_result["slow_s"] = round(time.monotonic() - started, 1)

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    fast = [connect_to(*local()) for _ in range(50)]
    fast_s = time.monotonic() - started
    still_blocked = thread.is_alive()
    thread.join()
    return {
        "fast": sorted(set(fast)),
        "fast_under_1s": fast_s < 1.0,
        "slow_still_blocked": still_blocked,
        **blocked_result,
    }


def case_scm_rights() -> dict:
    """sendmsg is emulated, not continued: descriptors in SCM_RIGHTS and gathered iovecs
    must arrive as the agent sent them."""
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    read_end, write_end = os.pipe()
    sent = left.sendmsg(
        [b"one-", b"two-", b"three"],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", write_end))],
    )
    data, ancillary, _, _ = right.recvmsg(100, socket.CMSG_SPACE(4))
    (passed,) = struct.unpack("i", ancillary[0][2][:4])
    os.write(passed, b"through the passed descriptor")
    os.close(write_end)
    os.close(passed)
    return {"sent": sent, "data": data.decode(), "pipe": os.read(read_end, 100).decode()}


# --- allowed paths --------------------------------------------------------------------------


def case_allowed_tcp() -> dict:
    out = {}
    for key, family, host in (
        ("v4", socket.AF_INET, CTX["peer4"]),
        ("v6", socket.AF_INET6, CTX["peer6"]),
        ("v4mapped", socket.AF_INET6, "::ffff:" + CTX["peer4"]),
    ):
        with socket.socket(family) as sock:
            result = c_connect(sock.fileno(), sockaddr(host, 8080))
            out[key] = result + (" " + exchange(sock) if result == "OK" else "")
    return out


def case_loopback() -> dict:
    out = {}
    with socket.create_connection(local()) as sock:
        out["v4"] = exchange(sock)
    with socket.create_connection(("::1", CTX["local_tcp6"])) as sock:
        out["v6"] = exchange(sock)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        sock.sendto(b"hi", ("127.0.0.1", CTX["local_udp"]))
        out["udp"] = sock.recv(100).decode()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(CTX["unix"])
        out["unix"] = exchange(sock)
    os.chdir(CTX["folder"])
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect("local.sock")  # relative: the agent's cwd, not the supervisor's
        out["unix_relative"] = exchange(sock)
    return out


def case_nonblocking() -> dict:
    with socket.socket() as sock:
        sock.setblocking(False)
        first = c_connect(sock.fileno(), sockaddr(CTX["peer4"], 8080))
        _, writable, _ = select.select([], [sock], [], 5)
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        sock.setblocking(True)
        reply = exchange(sock) if writable and not error else ""
    return {"first": first, "writable": bool(writable), "so_error": error, "reply": reply}


def case_stream_cap() -> dict:
    """A stream sendto with an address is emulated from a copy of at most 1 MiB: the agent
    gets a short count (uncontained, the kernel sends everything)."""
    total = (1 << 20) + 65536
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        received = []

        def drain() -> None:
            conn, _ = server.accept()
            with conn:
                while chunk := conn.recv(1 << 16):
                    received.append(len(chunk))

        reader = threading.Thread(target=drain)
        reader.start()
        with socket.create_connection(server.getsockname()) as sock:
            sock.settimeout(10)
            raw = sockaddr("127.0.0.1", server.getsockname()[1])
            sent = libc.sendto(sock.fileno(), b"x" * total, total, 0, raw, len(raw))
            result = sent if sent >= 0 else name(ctypes.get_errno())
        reader.join(10)
    return {"sent": result, "received": sum(received), "offered": total}


def case_udp_connected() -> dict:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        unconnected = libc.sendto(sock.fileno(), b"u", 1, 0, sockaddr(CTX["peer4"], 8081), 16)
        unconnected_result = "OK" if unconnected >= 0 else name(ctypes.get_errno())
        connected = c_connect(sock.fileno(), sockaddr(CTX["peer4"], 8081))
        sock.send(b"c")
        reply = sock.recv(100).decode()
    return {"unconnected": unconnected_result, "connect": connected, "reply": reply}


def case_dns() -> dict:
    """A lookup the way glibc's resolver makes one: connect a datagram socket to the
    resolver, then send the query on it (sendmsg; `send` is a sendto the filter lets by)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        udp = c_connect(sock.fileno(), sockaddr(CTX["peer4"], 53))
        try:
            sock.sendmsg([DNS_QUERY])
            query = "OK"
        except OSError as exc:
            query = name(exc.errno or 0)
        sent = libc.send(sock.fileno(), DNS_QUERY, len(DNS_QUERY), 0)
        plain = "OK" if sent >= 0 else name(ctypes.get_errno())
    return {"udp53": udp, "query": query, "send": plain, "tcp53": connect_to(CTX["peer4"], 53)}


def case_listen() -> dict:
    out = {}
    for key, family, host in (
        ("any4", socket.AF_INET, "0.0.0.0"),
        ("veth4", socket.AF_INET, "10.77.0.1"),
        ("loop4", socket.AF_INET, "127.0.0.1"),
        ("any6", socket.AF_INET6, "::"),
        ("loop6", socket.AF_INET6, "::1"),
    ):
        with socket.socket(family) as sock:
            sock.bind((host, 0))
            try:
                sock.listen()
                out[key] = "OK"
            except OSError as exc:
                out[key] = name(exc.errno or 0)
    with socket.socket() as sock:  # unbound: listen() autobinds to 0.0.0.0
        try:
            sock.listen()
            out["unbound"] = "OK"
        except OSError as exc:
            out["unbound"] = name(exc.errno or 0)
    return out


def case_filesystem() -> dict:
    """Destructive calls are observed (and performed); reads and appends are not trapped."""
    folder = CTX["folder"] + "/fs"
    os.mkdir(folder)
    os.chdir(folder)

    def make(path: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        os.write(fd, b"data")
        os.close(fd)

    for item in ("a", "b", "c", "d", "e", "f", "g", "keep"):
        make(item)
    os.mkdir("dir1")
    os.mkdir("dir2")
    keep: list[ctypes.Array] = []

    def c(text: str) -> int:
        buffer = ctypes.create_string_buffer(text.encode())
        keep.append(buffer)
        return ctypes.addressof(buffer)

    at_fdcwd = -100
    done = {
        "unlink": syscall(87, c("a")),
        "unlinkat": syscall(263, at_fdcwd, c("b"), 0),
        "unlinkat_dir": syscall(263, at_fdcwd, c("dir1"), 0x200),
        "rmdir": syscall(84, c(folder + "/dir2")),
        "rename": syscall(82, c("c"), c("c2")),
        "renameat": syscall(264, at_fdcwd, c("c2"), at_fdcwd, c("c3")),
        "renameat2": syscall(316, at_fdcwd, c("c3"), at_fdcwd, c("c4"), 0),
        "truncate": syscall(76, c("d"), 0),
    }
    fd = os.open("e", os.O_WRONLY)
    done["ftruncate"] = syscall(77, fd, 1)
    os.close(fd)

    def opened(*args: int) -> str:
        fd = syscall_value(*args)
        if isinstance(fd, int):
            os.close(fd)
            return "OK"
        return fd

    done["creat"] = opened(85, c("created"), 0o644)
    how = ctypes.create_string_buffer(struct.pack("<QQQ", os.O_WRONLY | os.O_TRUNC, 0, 0))
    done["openat2_trunc"] = opened(437, at_fdcwd, c("f"), ctypes.addressof(how), 24)
    plain = ctypes.create_string_buffer(struct.pack("<QQQ", os.O_RDONLY, 0, 0))
    done["openat2_read"] = opened(437, at_fdcwd, c("keep"), ctypes.addressof(plain), 24)
    done["open_trunc"] = opened(2, c("g"), os.O_WRONLY | os.O_TRUNC)
    with open("g", "w") as handle:  # Python's "w": openat with O_TRUNC
        handle.write("new")
    for _ in range(50):  # reads and appends: never trapped
        with open("keep", "rb") as handle:
            handle.read()
        with open("keep", "ab") as handle:
            handle.write(b"+")
    remaining = sorted(os.listdir("."))
    return {"done": done, "remaining": remaining, "folder": folder}


CASES = {name[5:]: value for name, value in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    result = CASES[sys.argv[1]]()
    print("RESULT " + json.dumps(result), flush=True)
