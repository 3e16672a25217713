"""A network namespace per egress test, with a veth peer namespace standing in for the internet.

Hard rule: no test traffic reaches a real network. pytest never runs a hostile agent itself;
it runs `unshare -n python -m tests.egress.lab LAB_SPEC`, so everything below happens in a
namespace the test created:

    namespace A (this lab)                          namespace B (tests/egress/peer.py)
      lo       127.0.0.1, ::1, 2001:db8:a::1          veth1 10.77.0.2/24, 2001:db8:77::2/64
      veth0    10.77.0.1/24 ----------------------->  TCP 8080 (pong), UDP 8081 (echo)
      default routes (v4 and v6) via the peer, with static neighbours: no ARP/ND, no
      link-local addresses, so veth0's tx counter moves only when A really sends a packet.

Any destination (203.0.113.7, 2001:db8:99::7, ...) is routed to B and dropped there unless
B serves it, so a containment bug shows up as a moved counter, never as a packet elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.namespace_run import run_tagged

REPO = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).with_name("hostile.py")
PEER4, PEER6 = "10.77.0.2", "2001:db8:77::2"
OFFHOST4, OFFHOST6 = "203.0.113.7", "2001:db8:99::7"
MAC_A, MAC_B = "02:00:00:00:77:01", "02:00:00:00:77:02"


# --- pytest side -------------------------------------------------------------------------------


def run_lab(
    case: str,
    *,
    allow: list[str] | None = None,
    contained: bool = True,
    unprivileged: bool = False,
    helper: str | None = None,
    options: dict[str, Any] | None = None,
    timeout: float = 60,
) -> dict[str, Any]:
    """Run one hostile case in a fresh network namespace; return what the lab measured."""
    spec = {
        "case": case,
        "allow": allow or [],
        "contained": contained,
        "unprivileged": unprivileged,
        "helper": helper,
        "options": options or {},
        "outer_netns": os.readlink("/proc/self/ns/net"),
    }
    argv = [sys.executable, "-m", "tests.egress.lab", json.dumps(spec)]
    return run_tagged(argv, "LAB", timeout=timeout)


# --- inside the namespace ------------------------------------------------------------------


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True)


def _write(path: str, value: str) -> None:
    Path(path).write_text(value)


def tx_packets(device: str = "veth0") -> int:
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == device:
            return int(counters.split()[9])
    raise RuntimeError(f"no device {device}")


class Peer:
    def __init__(self) -> None:
        environ = {**os.environ, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen(
            ["unshare", "-n", sys.executable, "-S", str(Path(__file__).with_name("peer.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environ,
        )
        pid = str(self.process.pid)
        time.sleep(0.05)
        for _ in range(100):  # wait until unshare has exec'd into the new namespace
            if os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                break
            time.sleep(0.01)
        else:
            raise RuntimeError("peer namespace did not appear")
        for conf in ("all", "default"):
            _write(f"/proc/sys/net/ipv6/conf/{conf}/addr_gen_mode", "1")
        _ip("link", "set", "lo", "up")
        _ip(
            "link", "add", "veth0", "address", MAC_A, "type", "veth",
            "peer", "name", "veth1", "address", MAC_B, "netns", pid,
        )  # fmt: skip
        _ip("addr", "add", "10.77.0.1/24", "dev", "veth0")
        _ip("-6", "addr", "add", "2001:db8:a::1/128", "dev", "lo", "nodad")
        _ip("link", "set", "veth0", "up")
        _ip("neigh", "add", PEER4, "lladdr", MAC_B, "dev", "veth0", "nud", "permanent")
        _ip("-6", "neigh", "add", PEER6, "lladdr", MAC_B, "dev", "veth0", "nud", "permanent")
        _ip("-6", "route", "add", "2001:db8:77::/64", "dev", "veth0")
        _ip("route", "add", "default", "via", PEER4)
        _ip("-6", "route", "add", "default", "via", PEER6, "dev", "veth0")
        script = f"""
set -e
echo 1 > /proc/sys/net/ipv6/conf/default/addr_gen_mode
ip link set lo up
ip link set veth1 up
ip addr add {PEER4}/24 dev veth1
ip -6 addr add {PEER6}/64 dev veth1 nodad
ip neigh add 10.77.0.1 lladdr {MAC_A} dev veth1 nud permanent
ip -6 neigh add 2001:db8:a::1 lladdr {MAC_A} dev veth1 nud permanent
ip -6 route add 2001:db8:a::/64 dev veth1
"""
        subprocess.run(["nsenter", "-t", pid, "-n", "sh", "-c", script], check=True)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("peer did not start")

    def counts(self) -> dict[str, int]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("report\n")
        self.process.stdin.flush()
        return dict(json.loads(self.process.stdout.readline()))

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


class LocalServers:
    """Loopback and unix servers in namespace A (exempt destinations), counting what arrives."""

    def __init__(self, folder: Path) -> None:
        self.counts = {"tcp": 0, "udp": 0, "unix": 0}
        self.tcp = self._listen(socket.AF_INET, "127.0.0.1")
        self.tcp6 = self._listen(socket.AF_INET6, "::1")
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix_path = str(folder / "local.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)
        self.unix.listen(64)
        for server, key in ((self.tcp, "tcp"), (self.tcp6, "tcp"), (self.unix, "unix")):
            threading.Thread(target=self._accept, args=(server, key), daemon=True).start()
        threading.Thread(target=self._udp, daemon=True).start()

    @staticmethod
    def _listen(family: int, host: str) -> socket.socket:
        server = socket.socket(family, socket.SOCK_STREAM)
        server.bind((host, 0))
        server.listen(256)
        return server

    def _accept(self, server: socket.socket, key: str) -> None:
        while True:
            conn, _ = server.accept()
            self.counts[key] += 1
            threading.Thread(target=self._pong, args=(conn,), daemon=True).start()

    @staticmethod
    def _pong(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                data = conn.recv(1024)
                if data:
                    conn.sendall(b"pong:" + data)
            except OSError:
                pass

    def settled(self, quiet_s: float = 0.1, limit_s: float = 10.0) -> dict[str, int]:
        """The counts once the accept threads have drained their queues: connections the
        agent opened and closed at once still wait there, and a count read under load
        (`make test`) missed them (955 counted of 1032 that connected)."""
        deadline = time.monotonic() + limit_s
        last = dict(self.counts)
        while time.monotonic() < deadline:
            time.sleep(quiet_s)
            now = dict(self.counts)
            if now == last:
                break
            last = now
        return last

    def _udp(self) -> None:
        while True:
            data, peer = self.udp.recvfrom(65535)
            self.counts["udp"] += 1
            self.udp.sendto(b"echo:" + data, peer)

    def context(self) -> dict[str, Any]:
        return {
            "local_tcp": self.tcp.getsockname()[1],
            "local_tcp6": self.tcp6.getsockname()[1],
            "local_udp": self.udp.getsockname()[1],
            "unix": self.unix_path,
        }


def _wait_result(path: Path, deadline: float) -> dict[str, Any] | None:
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        for line in text.splitlines():
            if line.startswith("RESULT "):
                return dict(json.loads(line[7:]))
        time.sleep(0.02)
    return None


def lab(spec: dict[str, Any]) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="flowproof-egress-"))
    os.chmod(folder, 0o777)
    peer = Peer()
    try:
        local = LocalServers(folder)
        context = {
            **local.context(),
            "peer4": PEER4,
            "peer6": PEER6,
            "offhost4": OFFHOST4,
            "offhost6": OFFHOST6,
            "helper": spec.get("helper"),
            "folder": str(folder),
            "repo": str(REPO),
            **spec["options"],
        }
        output = folder / "agent.out"
        output.touch()
        os.chmod(output, 0o666)
        agent = [sys.executable, "-S", str(HOSTILE), spec["case"], json.dumps(context)]
        run = {"agent": agent, "allow": spec["allow"], "output": str(output)}
        tx_before, peer_before = tx_packets(), peer.counts()
        command = [sys.executable, "-m", "tests.egress.lab", "--supervise", json.dumps(run)]
        if not spec["contained"]:
            command[-2] = "--uncontained"
        if spec["unprivileged"]:
            # Same uid, no capabilities: what an ordinary user's supervisor and agent are for
            # ptrace access (uid 0 kept only so the interpreter under /root stays readable).
            command = [
                "setpriv", "--securebits=+noroot,+noroot_locked,+no_setuid_fixup",
                "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", *command,
            ]  # fmt: skip
        supervise = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
        )
        result = _wait_result(output, time.monotonic() + 20)
        time.sleep(0.05)  # let a packet that did leave reach the counters
        reports = [line for line in supervise.stdout.splitlines() if line.startswith("REPORT ")]
        return {
            "result": result,
            "agent_output": output.read_text()[-4000:],
            "supervisor_exit": supervise.returncode,
            "supervisor_stderr": supervise.stderr[-4000:],
            "report": json.loads(reports[-1][7:]) if reports else None,
            "tx": tx_packets() - tx_before,
            "peer": {k: v - peer_before[k] for k, v in peer.counts().items()},
            "local": local.settled(),
        }
    finally:
        peer.stop()
        shutil.rmtree(folder, ignore_errors=True)


def supervise(run: dict[str, Any], contained: bool) -> None:
    """The supervisor process of one case (root, or uid 65534 for the unprivileged cases)."""
    from flowproof_cli.egress import Policy
    from tests.egress.contained import run_contained

    reason = None if contained else "the test asked for an uncontained control run"
    with open(run["output"], "a") as output:
        if contained:
            outcome = run_contained(
                run["agent"], Policy.from_entries(run["allow"]), stdout=output, stderr=output
            )
            returncode, report = outcome.returncode, outcome.report
        else:
            completed = subprocess.run(run["agent"], stdout=output, stderr=output, check=False)
            returncode, report = completed.returncode, None
    payload = {"returncode": returncode, "reason": reason}
    if report is not None:
        payload.update(
            containment=report.containment.line,
            blocked=[
                {
                    "destination": b.destination,
                    "protocol": b.protocol,
                    "syscall": b.syscall,
                    "queries": list(b.queries),
                }
                for b in report.blocked
            ],
            trace=report.trace_section(),
            local=dict(report.local),
            fs=[{"syscall": e.syscall, "detail": e.detail} for e in report.fs_events],
            fs_lines=report.fs_lines(),
            fs_faults=report.fs_faults,
            notes=report.notes,
            stderr_lines=report.stderr_lines(),
        )
    print("REPORT " + json.dumps(payload), flush=True)


def main(argv: list[str]) -> None:
    if argv[0] in ("--supervise", "--uncontained"):
        supervise(json.loads(argv[1]), contained=argv[0] == "--supervise")
        return
    spec = json.loads(argv[0])
    if os.readlink("/proc/self/ns/net") == spec["outer_netns"]:
        raise SystemExit("refusing to run: not inside a network namespace of its own")
    print("LAB " + json.dumps(lab(spec)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
