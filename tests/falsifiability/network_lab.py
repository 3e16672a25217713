"""What flowproof does on the network, measured inside a network namespace with only loopback.

pytest never runs this itself: `run_lab()` re-executes it as
`unshare -n sh -c 'ip link set lo up; python -m tests.falsifiability.network_lab'`, so the
fake model, the "evil" listeners and flowproof all live on a loopback nobody else shares,
with no route anywhere. Inside, it:

* starts the fake model (the configured upstream) and two evil listeners that must see
  nothing: one on 127.0.0.1:9, the proxy's placeholder reverse target, one on a free port
  that the hostile requests name (Host, absolute-form, X-Forwarded-Host, a path with a
  scheme, base-URL headers, HTTP/2 `:authority`, ...);
* records a flow whose agent sends those requests raw to the proxy, then replays a plain
  flow, and during both polls every socket of flowproof's process tree (`/proc/<pid>/fd`
  against `/proc/net/{tcp,tcp6,udp,udp6}`);
* replays the plain flow once more under `strace -f`, listing every connect attempted.

It prints `LAB {json}` on stdout: what each probe got, what the fake and the evil listeners
received, the sockets seen, and the connects.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.namespace_run import run_tagged

REPO = Path(__file__).resolve().parents[2]
PLACEHOLDER_PORT = 9  # the proxy's reverse target (runner/proxy_engine.py): a fall-through dials it
TCP_LISTEN, UDP_UNCONNECTED = "0A", "07"
_SOCKET = re.compile(r"socket:\[(\d+)\]")

# The agent of the hostile flow: every probe raw on its own connection, each answer's status.
PROBE_AGENT = r"""
import json, os, socket, sys, time

took = {}
proxy = int(os.environ["OPENAI_BASE_URL"].rsplit(":", 1)[1].split("/")[0])
evil = int(os.environ["EVIL_PORT"])
chat = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
claude = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8,
                     "messages": [{"role": "user", "content": "hi"}]})
gemini = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
E = f"127.0.0.1:{evil}"
URL = f"http://{E}/v1"


def http(target, headers=(), body=chat, version="HTTP/1.1", method="POST", host=None):
    lines = [f"{method} {target} {version}"]
    if host is not False:
        lines.append(f"Host: {host or f'127.0.0.1:{proxy}'}")
    lines += [f"{name}: {value}" for name, value in headers]
    if not any(name.lower() == "connection" for name, _ in headers):
        lines.append("Connection: close")  # so the answer ends with the connection
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n" + (body or "")).encode()


def exchange(raw):
    data = b""
    with socket.create_connection(("127.0.0.1", proxy), timeout=10) as sock:
        sock.sendall(raw)
        try:
            while chunk := sock.recv(65536):
                data += chunk
                sock.settimeout(1)  # an answer has begun: the rest comes at once or never
        except OSError:  # a connection left open after its answer: what came is enough
            pass
    statuses = [int(line.split()[1]) for line in data.split(b"\r\n")
                if line.startswith(b"HTTP/") and len(line.split()) > 1]
    return statuses or ["no answer"]


def h2(authority, path, scheme="http"):
    import h2.config, h2.connection, h2.events
    config = h2.config.H2Configuration(client_side=True)
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    headers = [(":method", "POST"), (":authority", authority), (":scheme", scheme),
               (":path", path), ("content-type", "application/json")]
    conn.send_headers(1, headers)
    conn.send_data(1, chat.encode(), end_stream=True)
    statuses = []
    with socket.create_connection(("127.0.0.1", proxy), timeout=20) as sock:
        sock.sendall(conn.data_to_send())
        sock.settimeout(5)
        try:
            while not statuses:
                data = sock.recv(65536)
                if not data:
                    break
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.ResponseReceived):
                        statuses += [int(v) for k, v in event.headers if k == b":status"]
                sock.sendall(conn.data_to_send())
        except Exception as exc:  # a reset, or bytes that are not HTTP/2: no answer
            return [f"closed: {type(exc).__name__}"]
    return statuses or ["closed"]


PROBES = {
    "plain": http("/v1/chat/completions"),
    "host header naming the evil listener": http("/v1/chat/completions", host=E),
    "host header naming another host": http("/v1/chat/completions", host=f"evil.example:{evil}"),
    "two host headers": http("/v1/chat/completions", [("Host", E)]),
    "absolute-form http": http(f"{URL}/chat/completions", host=E),
    "absolute-form https": http(f"https://{E}/v1/chat/completions", host=E),
    "absolute-form naming the proxy itself": http(f"http://127.0.0.1:{proxy}/v1/chat/completions"),
    "authority-form POST": http(E, host=E),
    "X-Forwarded-Host": http("/v1/chat/completions", [("X-Forwarded-Host", E),
                             ("X-Forwarded-Proto", "http"), ("X-Forwarded-Port", str(evil))]),
    "Forwarded": http("/v1/chat/completions", [("Forwarded", f"host={E};proto=http")]),
    "X-Original-URL": http("/v1/chat/completions", [("X-Original-URL", f"{URL}/chat/completions"),
                           ("X-Rewrite-URL", f"{URL}/chat/completions")]),
    "base URL headers": http("/v1/chat/completions", [(name, URL) for name in (
        "X-Base-URL", "OpenAI-Base-URL", "X-OpenAI-Base-URL", "Anthropic-Base-URL", "X-Upstream",
        "X-Upstream-URL", "X-Target-URL", "X-Proxy-Target", "X-Flowproof-Upstream",
        "X-Host")]),
    "path with a scheme": http(f"/{URL}/chat/completions"),
    "scheme-relative path": http(f"//{E}/v1/chat/completions"),
    "path with userinfo": http(f"/@{E}/v1/chat/completions"),
    "path with encoded slashes": http(f"/%2F%2F{E}/v1/chat/completions"),
    "path with dot segments": http(f"/v1/../../{E}/v1/chat/completions"),
    "query naming the evil listener": http(f"/v1/chat/completions?base_url={URL}&url={URL}"),
    "anthropic route, evil host": http("/v1/messages", host=E, body=claude),
    "gemini route, scheme in the path": http(
        f"/v1beta/models/http:%2F%2F{E}/m:generateContent", body=gemini),
    "gemini route, host before the version": http(
        f"//{E}/v1beta/models/m:generateContent", body=gemini),
    "CONNECT": http(E, method="CONNECT", body=None, host=E),
    "HTTP/1.0 without Host": http("/v1/chat/completions", version="HTTP/1.0", host=False),
    "h2c upgrade": http("/v1/chat/completions", [("Connection", "Upgrade, HTTP2-Settings"),
                        ("Upgrade", "h2c"), ("HTTP2-Settings", "AAMAAABkAAQAAP__")]),
    "websocket upgrade": http("/v1/chat/completions", [("Connection", "Upgrade"),
                              ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
                              ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")],
                              method="GET", body=None, host=E),
    "pipelined absolute-form after a good request": http(
        "/v1/chat/completions", [("Connection", "keep-alive")]) + http(f"{URL}/chat/completions", host=E),
    "OPTIONS *": http("*", method="OPTIONS", body=None),
    # What once fell through an addon toward the placeholder target (127.0.0.1:9):
    "JSON nested 100,000 deep": http("/v1/chat/completions", body="[" * 100_000 + "]" * 100_000),
    "a body claiming gzip that is not": http(
        "/v1/chat/completions", [("Content-Encoding", "gzip")]),
    "Content-Encoding: compress": http(
        "/v1/chat/completions", [("Content-Encoding", "compress")]),
    "messages of the wrong type": http(
        "/v1/chat/completions", body=json.dumps({"model": "m", "messages": 5})),
}
seen = {}
for name, raw in PROBES.items():
    started = time.monotonic()
    seen[name] = exchange(raw.replace(b"\r\n", f"\r\nX-Probe: {name}\r\n".encode(), 1))
    took[name] = round(time.monotonic() - started, 2)
seen["HTTP/2 :authority naming the evil listener"] = h2(E, "/v1/chat/completions")
seen["HTTP/2 absolute :path"] = h2(E, f"{URL}/chat/completions")
with open(os.environ["PROBES_OUT"], "w") as out:
    json.dump({"seen": seen, "took": took}, out)
"""

PLAIN_AGENT = r"""
import json, os, urllib.request
body = json.dumps({"model": "gpt-4o-mini",
                   "messages": [{"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]}]})
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
                                 body.encode(), {"content-type": "application/json"})
with urllib.request.urlopen(request, timeout=30) as answer:
    print(json.loads(answer.read())["choices"][0]["message"]["content"])
"""


# --- /proc readers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sock:
    """One socket as /proc/net lists it (local address only; state as the kernel's hex)."""

    proto: str
    host: str
    port: int
    state: str

    @property
    def listening(self) -> bool:
        """A TCP listener, or a bound UDP socket that accepts datagrams from anyone."""
        return self.state == (TCP_LISTEN if self.proto.startswith("tcp") else UDP_UNCONNECTED)

    def show(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.proto} {host}:{self.port}"


def _address(hex_address: str) -> tuple[str, int]:
    """`0100007F:1F90` -> ('127.0.0.1', 8080); IPv6 is four little-endian 32-bit words."""
    host_hex, port_hex = hex_address.split(":")
    raw = bytes.fromhex(host_hex)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1]), int(port_hex, 16)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words), int(port_hex, 16)


def parse_net_table(proto: str, text: str) -> dict[int, Sock]:
    """A /proc/net/{tcp,tcp6,udp,udp6} table by socket inode."""
    table = {}
    for row in text.splitlines()[1:]:
        fields = row.split()
        if len(fields) < 10:
            continue
        host, port = _address(fields[1])
        table[int(fields[9])] = Sock(proto, host, port, fields[3])
    return table


def is_loopback(host: str) -> bool:
    if host.startswith("::ffff:"):
        host = host[len("::ffff:") :]
    return host == "::1" or (host.count(".") == 3 and host.startswith("127."))


def net_tables() -> dict[int, Sock]:
    tables: dict[int, Sock] = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            tables.update(parse_net_table(proto, Path(f"/proc/net/{proto}").read_text()))
        except OSError:
            continue
    return tables


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def process_tree(root: int) -> Iterator[int]:
    tree, todo = _children(), [root]
    while todo:
        pid = todo.pop()
        yield pid
        todo.extend(tree.get(pid, []))


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                match = _SOCKET.fullmatch(os.readlink(fd))
            except OSError:
                continue
            if match:
                inodes.add(int(match.group(1)))
    except OSError:
        pass
    return inodes


class SocketWatch:
    """Polls the sockets of a process tree until stopped; keeps every listening one seen."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.listening: set[Sock] = set()
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            inodes = {inode for pid in process_tree(self.root) for inode in socket_inodes(pid)}
            tables = net_tables()
            self.listening.update(
                tables[inode] for inode in inodes if inode in tables and tables[inode].listening
            )
            self.polls += 1
            self._stop.wait(0.01)

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join()
        return sorted(sock.show() for sock in self.listening)


# --- strace ------------------------------------------------------------------------------------

_CONNECT = re.compile(r"connect\(\d+, \{sa_family=(AF_\w+)(.*?)\}, \d+\)")
_INET = re.compile(r'inet_(?:addr|pton)\((?:AF_INET6?, )?"([^"]+)"')
_PORT = re.compile(r"sin6?_port=htons\((\d+)\)")


def connects(strace_text: str) -> list[str]:
    """Every connect an `strace -f -e trace=connect` log shows, as `family address:port`."""
    found = []
    for match in _CONNECT.finditer(strace_text):
        family, rest = match.groups()
        host = _INET.search(rest)
        port = _PORT.search(rest)
        if host and port:
            shown = f"[{host.group(1)}]" if ":" in host.group(1) else host.group(1)
            where = f"{shown}:{port.group(1)}"
        else:  # unreadable: kept whole, and off-host unless it is a unix socket
            where = rest.strip(", ")[:80]
        found.append(f"{family} {where}")
    return found


def off_host(connect: str) -> bool:
    """A connect to anything but loopback or a unix socket."""
    family, _, where = connect.partition(" ")
    if family not in ("AF_INET", "AF_INET6"):
        return family != "AF_UNIX"
    return not is_loopback(where.rsplit(":", 1)[0].strip("[]"))


# --- the lab, inside the namespace --------------------------------------------------------------


class Evil:
    """A listener that must receive nothing: counts connections and bytes."""

    def __init__(self, port: int = 0) -> None:
        self.server = socket.create_server(("127.0.0.1", port), backlog=64)
        self.port = int(self.server.getsockname()[1])
        self.accepted = 0
        self.received = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.server.accept()
            self.accepted += 1
            with conn:
                conn.settimeout(2)
                try:
                    while chunk := conn.recv(65536):
                        self.received += len(chunk)
                except OSError:
                    pass

    def counts(self) -> dict[str, int]:
        return {"accepted": self.accepted, "received": self.received}


def _flow(folder: Path, name: str, agent: str, prompt: str) -> Path:
    script = folder / f"{name}_agent.py"
    script.write_text(agent)
    spec = folder / f"{name}.flow.yaml"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    spec.write_text(
        json.dumps(
            {
                "name": name,
                "app": "agent",
                "agent": {"command": command},
                "steps": [{"prompt": prompt}],
            }
        )
    )
    return spec


def _flowproof(*args: str, env: dict[str, str], strace: Path | None = None) -> dict[str, Any]:
    command = [sys.executable, "-m", "flowproof_cli", *args]
    if strace is not None:
        command = ["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(strace), *command]
    process = subprocess.Popen(
        command, env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watch = SocketWatch(process.pid)
    stdout, stderr = process.communicate(timeout=180)
    listening = watch.stop()
    return {
        "code": process.returncode,
        "stdout": stdout[-3000:],
        "stderr": stderr[-3000:],
        "listening": listening,
        "polls": watch.polls,
    }


def _control_listener_seen() -> list[str]:
    """The watch itself sees a listener on 0.0.0.0 (so an empty report is a measurement)."""
    code = "import socket,time;s=socket.socket();s.bind(('0.0.0.0',0));s.listen();time.sleep(1)"
    process = subprocess.Popen([sys.executable, "-c", code])
    watch = SocketWatch(process.pid)
    process.wait()
    return watch.stop()


def _control_connect_seen(folder: Path) -> list[str]:
    """strace shows an off-host connect even where nothing routes it (ENETUNREACH)."""
    log = folder / "control.strace"
    code = "import socket\ntry: socket.create_connection(('203.0.113.7', 80), timeout=1)\nexcept OSError: pass"
    subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(log), sys.executable, "-c", code],
        check=False,
    )
    return connects(log.read_text())


def lab() -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from tests.fakes.fake_upstream import FakeUpstream  # imported inside the namespace

    folder = Path(tempfile.mkdtemp(prefix="flowproof-netlab-"))
    try:
        placeholder, evil = Evil(PLACEHOLDER_PORT), Evil()
        with socket.create_connection(("127.0.0.1", evil.port)) as probe:  # the count works
            probe.sendall(b"x")
        time.sleep(0.2)
        control = evil.counts()
        evil.accepted = evil.received = 0
        results: dict[str, Any] = {"evil_control": control}
        with FakeUpstream() as fake:
            env = {
                **os.environ,
                "PYTHONPATH": str(REPO),
                "FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1",
                "FLOWPROOF_AGENT_KEY": "sk-proj-" + "n" * 48,
                "EVIL_PORT": str(evil.port),
                "PROBES_OUT": str(folder / "probes.json"),
            }
            hostile = _flow(folder, "hostile", PROBE_AGENT, "probe the proxy")
            plain = _flow(folder, "plain", PLAIN_AGENT, "Say hello")
            results["record_hostile"] = _flowproof("record", str(hostile), env=env)
            results["record_plain"] = _flowproof("record", str(plain), env=env)
            results["fake_received"] = [
                [request.headers.get("x-probe"), request.headers.get("host"), request.path]
                for request in fake.requests
            ]
            results["fake_base"] = fake.base_url
        results["probes"] = json.loads((folder / "probes.json").read_text())
        replay_env = {k: v for k, v in env.items() if not k.startswith("FLOWPROOF_AGENT")}
        results["replay_plain"] = _flowproof("run", str(plain), env=replay_env)
        if shutil.which("strace"):
            log = folder / "replay.strace"
            traced = _flowproof("run", str(plain), env=replay_env, strace=log)
            traced["connects"] = connects(log.read_text())
            results["replay_traced"] = traced
            results["strace_control"] = _control_connect_seen(folder)
        results["listener_control"] = _control_listener_seen()
        results["evil"] = evil.counts()
        results["placeholder"] = placeholder.counts()
        results["routes"] = Path("/proc/net/route").read_text().splitlines()[1:]
        return results
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- pytest side -------------------------------------------------------------------------------


def namespace_problem() -> str | None:
    """Why this machine cannot run the lab (no unshare, not root), or None."""
    if sys.platform != "linux":
        return "network namespaces are Linux-only"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "`unshare` or `ip` is missing (util-linux, iproute2)"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return "cannot create a network namespace here (needs root): " + probe.stderr.decode()
    return None


def run_lab(timeout: float = 600) -> dict[str, Any]:
    script = f"ip link set lo up && exec {shlex.quote(sys.executable)} -m tests.falsifiability.network_lab"
    env = {**os.environ, "OUTER_NETNS": os.readlink("/proc/self/ns/net")}
    return run_tagged(["sh", "-c", script], "LAB", timeout=timeout, env=env)


if __name__ == "__main__":
    if os.readlink("/proc/self/ns/net") == os.environ.get("OUTER_NETNS"):
        raise SystemExit("refusing to run: not inside a network namespace of its own")
    print("LAB " + json.dumps(lab()), flush=True)
