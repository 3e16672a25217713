"""Every MCP fixture in tests/mcp_fixtures/ against its real peers, directly (no flowproof).

Proves the servers and client "agents" flowproof's MCP boundary is tested with really work:
each client against each compatible server over stdio and streamable HTTP, in both protocol
eras (2.x client legacy = handshake, auto = 2026-07-28 where the server has it), with the real
side effects (the note file, NOTES_DIR/server.log) and the server-initiated traffic.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, clean_environ
from tests.e2e.sockets_and_pids import free_port

pytestmark = pytest.mark.slow

FIXTURES = REPO / "tests" / "mcp_fixtures"
NODE_MODULES = REPO / "tests" / "node_modules"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
MCP1 = REPO / ".deps" / "mcp1"
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
ALL_STEPS = "write,read,slow,elicit,sample,roots,touch"
EXPECTED_LOG = [
    'tools/call write_note {"name":"a.txt","text":"hello"}',
    'tools/call read_note {"name":"a.txt"}',
    'tools/call slow_count {"delay":0.1,"n":3}',
    'tools/call confirm_write {"name":"a.txt","ok":true,"text":"hello"}',
    'tools/call summarize_note {"name":"a.txt"}',
    "tools/call list_client_roots {}",
    'tools/call touch_note {"name":"a.txt"}',
]
NOTES_TOOLS = [
    "confirm_write",
    "list_client_roots",
    "read_note",
    "slow_count",
    "summarize_note",
    "touch_note",
    "write_note",
]

needs_mcp1 = pytest.mark.skipif(
    not any(MCP1.glob("mcp-1.*.dist-info")),
    reason="the mcp 1.x SDK is missing at .deps/mcp1: run scripts/bootstrap.sh",
)
needs_node = pytest.mark.skipif(
    not EVERYTHING.is_file() or not FILESYSTEM.is_file(),
    reason="tests/node_modules lacks the MCP servers: run `npm ci` in tests/ (make bootstrap does)",
)


def server_cmd(script: str) -> str:
    return shlex.join([sys.executable, str(FIXTURES / script)])


def run_client(
    script: str, *args: str, env: dict[str, str] | None = None, expect: int = 0
) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, str(FIXTURES / script), *args],
        env=clean_environ(env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == expect, (
        f"{script} {args} exited {completed.returncode}\n"
        f"stdout:\n{completed.stdout}\nstderr:\n{completed.stderr}"
    )
    return json.loads(completed.stdout) if expect in (0, 1) else {"stderr": completed.stderr}


def wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{what} did not listen on 127.0.0.1:{port} within 15 s")


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp*) in LISTEN state on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":
                found.add(address)
    return found


def start_server(argv: list[str], port: int, env: dict[str, str]) -> Iterator[str]:
    proc = subprocess.Popen(
        argv,
        env=clean_environ(env),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc, " ".join(argv))
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def notes_dir(tmp_path: Path) -> Path:
    return tmp_path / "notes"


def http_notes_server(version: str, notes_dir: Path, *extra: str) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, str(FIXTURES / f"py_server_{version}.py"), "--transport", "http"]
    yield from start_server(
        [*argv, "--port", str(port), *extra], port, {"NOTES_DIR": str(notes_dir)}
    )


class SharedServer:
    """One HTTP notes server for the module; each test reads only the log lines it caused."""

    def __init__(self, url: str, notes_dir: Path) -> None:
        self.url, self.notes_dir = url, notes_dir
        self._seen = 0

    def fresh(self) -> SharedServer:
        """Forget the note and the log lines of earlier tests."""
        (self.notes_dir / "a.txt").unlink(missing_ok=True)
        log = self.notes_dir / "server.log"
        self._seen = len(log.read_text().splitlines()) if log.exists() else 0
        return self

    def new_log_lines(self) -> list[str]:
        return (self.notes_dir / "server.log").read_text().splitlines()[self._seen :]


def _shared(version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    notes = tmp_path_factory.mktemp(f"http_{version}") / "notes"
    for url in http_notes_server(version, notes):
        yield SharedServer(url, notes)


@pytest.fixture(scope="module")
def http_v2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    yield from _shared("v2", tmp_path_factory)


@pytest.fixture(scope="module")
def http_v1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    if not any(MCP1.glob("mcp-1.*.dist-info")):
        pytest.skip("the mcp 1.x SDK is missing at .deps/mcp1: run scripts/bootstrap.sh")
    yield from _shared("v1", tmp_path_factory)


@pytest.fixture
def http_server(request: pytest.FixtureRequest) -> SharedServer:
    """The module's HTTP notes server named by the indirect parameter ("v1" or "v2")."""
    shared: SharedServer = request.getfixturevalue(f"http_{request.param}")
    return shared.fresh()


def assert_full_session(
    summary: dict[str, Any], notes_dir: Path, protocol: str, log: list[str] | None = None
) -> None:
    """The all-steps session against a notes server: results, traffic and side effects."""
    assert summary["protocol_version"] == protocol
    assert summary["server_name"] == "notes"
    assert summary["tools"] == NOTES_TOOLS
    texts = [call["text"] for call in summary["calls"]]
    assert texts == [
        "wrote 5 bytes to a.txt",
        "hello",
        "counted to 3",
        "wrote 5 bytes to a.txt",
        "summary of a.txt by canned-model: a canned summary from the client",
        "roots: file:///tmp/flowproof-notes",
        "touched note://a.txt",
    ]
    assert [p["progress"] for p in summary["progress"]] == [1, 2, 3]
    assert [r["method"] for r in summary["server_requests"]] == [
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
    ]
    updates = [n for n in summary["notifications"] if n.get("uri") == "note://a.txt"]
    assert updates, f"no resources/updated for note://a.txt: {summary['notifications']}"
    if protocol == MODERN:
        assert any(n["method"] == "subscriptions/listen" for n in updates)
    assert (notes_dir / "a.txt").read_text() == "hello"
    if log is None:
        log = (notes_dir / "server.log").read_text().splitlines()
    assert log == EXPECTED_LOG


# --- mcp 2.x client against the mcp 2.x server (MCPServer) -------------------------------------


@pytest.mark.parametrize(("mode", "protocol"), [("legacy", HANDSHAKE), ("auto", MODERN)])
def test_v2_client_v2_server_stdio(mode: str, protocol: str, notes_dir: Path) -> None:
    summary = run_client(
        "py_client_v2.py",
        *("--mode", mode, "--steps", ALL_STEPS),
        env={
            "NOTES_DIR": str(notes_dir),
            "FLOWPROOF_MCP_SERVER_NOTES": server_cmd("py_server_v2.py"),
        },
    )
    assert summary["server_source"] == "FLOWPROOF_MCP_SERVER_NOTES"
    assert_full_session(summary, notes_dir, protocol)


@pytest.mark.parametrize("http_server", ["v2"], indirect=True)
@pytest.mark.parametrize(("mode", "protocol"), [("legacy", HANDSHAKE), ("auto", MODERN)])
def test_v2_client_v2_server_http(mode: str, protocol: str, http_server: SharedServer) -> None:
    summary = run_client(
        "py_client_v2.py",
        *("--transport", "http", "--mode", mode, "--steps", ALL_STEPS),
        env={"FLOWPROOF_MCP_URL_NOTES": http_server.url},
    )
    assert summary["server_source"] == "FLOWPROOF_MCP_URL_NOTES"
    assert_full_session(summary, http_server.notes_dir, protocol, http_server.new_log_lines())


def test_v2_server_stateless_http_serves_2026_input_required(notes_dir: Path) -> None:
    """Stateless HTTP has no back-channel: only 2026-07-28's input_required carries elicitation."""
    for url in http_notes_server("v2", notes_dir, "--stateless"):
        summary = run_client(
            "py_client_v2.py",
            *("--transport", "http", "--url", url, "--steps", "write,elicit"),
        )
        assert summary["protocol_version"] == MODERN
        assert [r["method"] for r in summary["server_requests"]] == ["elicitation/create"]
        legacy = run_client(
            "py_client_v2.py",
            *("--transport", "http", "--url", url, "--mode", "legacy", "--steps", "elicit"),
            expect=2,
        )
        assert "no back-channel for server-initiated requests" in legacy["stderr"]


# --- the mcp 1.x server (FastMCP) and the mcp 1.x client ---------------------------------------


@needs_mcp1
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_v2_client_v1_server_stdio(mode: str, notes_dir: Path) -> None:
    """A 1.x server knows no server/discover: mode=auto falls back to the handshake."""
    summary = run_client(
        "py_client_v2.py",
        *("--mode", mode, "--steps", ALL_STEPS, "--server-cmd", server_cmd("py_server_v1.py")),
        env={"NOTES_DIR": str(notes_dir)},
    )
    assert summary["server_source"] == "--server-cmd"
    assert_full_session(summary, notes_dir, HANDSHAKE)


@pytest.mark.parametrize("http_server", ["v1"], indirect=True)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_v2_client_v1_server_http(mode: str, http_server: SharedServer) -> None:
    """Over HTTP the 1.x server answers server/discover with a 400: auto falls back too."""
    summary = run_client(
        "py_client_v2.py",
        *("--transport", "http", "--mode", mode, "--steps", ALL_STEPS),
        env={"FLOWPROOF_MCP_URL_NOTES": http_server.url},
    )
    assert_full_session(summary, http_server.notes_dir, HANDSHAKE, http_server.new_log_lines())


@needs_mcp1
@pytest.mark.parametrize("server", ["v1", "v2"])
def test_v1_client_stdio(server: str, notes_dir: Path) -> None:
    summary = run_client(
        "py_client_v1.py",
        *("--steps", ALL_STEPS),
        env={
            "NOTES_DIR": str(notes_dir),
            "FLOWPROOF_MCP_SERVER_NOTES": server_cmd(f"py_server_{server}.py"),
        },
    )
    assert summary["sdk"].startswith("mcp 1.")
    assert_full_session(summary, notes_dir, HANDSHAKE)


@needs_mcp1
@pytest.mark.parametrize("http_server", ["v1", "v2"], indirect=True)
def test_v1_client_http(http_server: SharedServer) -> None:
    summary = run_client(
        "py_client_v1.py",
        *("--transport", "http", "--steps", ALL_STEPS),
        env={"FLOWPROOF_MCP_URL_NOTES": http_server.url},
    )
    assert_full_session(summary, http_server.notes_dir, HANDSHAKE, http_server.new_log_lines())


@needs_mcp1
def test_v1_server_json_response_http(notes_dir: Path) -> None:
    """JSON answers: plain calls work; progress has no stream to ride on."""
    for url in http_notes_server("v1", notes_dir, "--json-response"):
        summary = run_client(
            "py_client_v1.py", *("--transport", "http", "--url", url, "--steps", "write,read,slow")
        )
        assert [c["text"] for c in summary["calls"]] == [
            "wrote 5 bytes to a.txt",
            "hello",
            "counted to 3",
        ]
        assert summary["progress"] == []


# --- how a client finds its server, and its errors -----------------------------------------------


def test_env_beats_fallback_and_names_follow_note_name(notes_dir: Path) -> None:
    summary = run_client(
        "py_client_v2.py",
        *("--name", "my-notes", "--server-cmd", "/nonexistent/server"),
        env={
            "NOTES_DIR": str(notes_dir),
            "NOTE_NAME": "b.txt",
            "NOTE_TEXT": "bye",
            "FLOWPROOF_MCP_SERVER_MY_NOTES": server_cmd("py_server_v2.py"),
        },
    )
    assert summary["server_source"] == "FLOWPROOF_MCP_SERVER_MY_NOTES"
    assert [c["text"] for c in summary["calls"]] == ["wrote 3 bytes to b.txt", "bye"]
    assert (notes_dir / "b.txt").read_text() == "bye"
    assert not (notes_dir / "a.txt").exists()


def test_client_errors_are_clear(notes_dir: Path) -> None:
    no_url = run_client("py_client_v2.py", "--transport", "http", expect=2)
    assert "set FLOWPROOF_MCP_URL_NOTES or pass --url" in no_url["stderr"]
    summary = run_client(
        "py_client_v2.py",
        *("--steps", "read", "--server-cmd", server_cmd("py_server_v2.py")),
        env={"NOTES_DIR": str(notes_dir), "NOTE_NAME": "absent.txt"},
        expect=1,
    )
    assert summary["calls"][0]["is_error"] is True
    assert "no note named 'absent.txt'" in summary["calls"][0]["text"]


# --- npm @modelcontextprotocol/server-everything and server-filesystem --------------------------


def everything_cmd() -> str:
    return shlex.join([str(FIXTURES / "run_everything.sh"), "stdio"])


def assert_everything_session(summary: dict[str, Any]) -> None:
    assert summary["protocol_version"] == HANDSHAKE
    calls = {c["tool"]: c for c in summary["calls"]}
    assert not any(c["is_error"] for c in summary["calls"]), summary["calls"]
    assert calls["echo"]["text"] == "Echo: hello"
    assert "canned-model" in calls["trigger-sampling-request"]["text"]
    assert "Name: Ada Lovelace" in calls["trigger-elicitation-request"]["text"]
    assert "file:///tmp/flowproof-notes" in calls["get-roots-list"]["text"]
    assert [p["progress"] for p in summary["progress"]] == [1, 2, 3]
    requests = [(r["method"], r["during"]) for r in summary["server_requests"]]
    assert requests == [
        ("roots/list", "no call (unsolicited)"),
        ("sampling/createMessage", "trigger-sampling-request"),
        ("elicitation/create", "trigger-elicitation-request"),
    ]
    updated = [
        n for n in summary["notifications"] if n["method"] == "notifications/resources/updated"
    ]
    assert updated and updated[0]["uri"] == summary["subscribed"]


@needs_node
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_everything_stdio(mode: str) -> None:
    summary = run_client(
        "py_client_everything.py",
        "--mode",
        mode,
        env={"FLOWPROOF_MCP_SERVER_EVERYTHING": everything_cmd()},
    )
    assert_everything_session(summary)
    # Over stdio the conditional tools' registration is announced, once per tool.
    assert any(n["method"] == "notifications/tools/list_changed" for n in summary["notifications"])


@needs_node
def test_everything_streamable_http_on_loopback_only() -> None:
    port = free_port()
    argv = [str(FIXTURES / "run_everything.sh"), "streamableHttp"]
    for url in start_server(argv, port, {"PORT": str(port)}):
        assert listening_addresses(port) == {"0100007F"}, "server-everything must bind 127.0.0.1"
        summary = run_client(
            "py_client_everything.py",
            *("--transport", "http", "--mode", "auto"),
            env={"FLOWPROOF_MCP_URL_EVERYTHING": url},
        )
        assert_everything_session(summary)


@needs_node
@pytest.mark.parametrize("roots", [False, True])
def test_filesystem_stdio_writes_a_real_file(roots: bool, tmp_path: Path) -> None:
    served, offered = tmp_path / "served", tmp_path / "offered"
    served.mkdir()
    offered.mkdir()
    command = shlex.join(["node", str(FILESYSTEM), str(served)])
    args = ["--roots", str(offered)] if roots else []
    summary = run_client(
        "py_client_filesystem.py", *args, env={"FLOWPROOF_MCP_SERVER_FILES": command}
    )
    target = (offered if roots else served).resolve()
    assert summary["protocol_version"] == HANDSHAKE
    assert summary["allowed_directories"] == [str(target)]
    assert [c["tool"] for c in summary["calls"]] == [
        "list_allowed_directories",
        "write_file",
        "read_text_file",
    ]
    assert summary["calls"][-1]["text"] == "hello"
    assert (target / "a.txt").read_text() == "hello"
    assert [r["method"] for r in summary["server_requests"]] == (["roots/list"] if roots else [])
    untouched = served if roots else offered  # roots REPLACE the directories given on argv
    assert list(untouched.iterdir()) == []
