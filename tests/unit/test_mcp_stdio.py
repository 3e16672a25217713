"""The stdio stand-in: record relays and captures, replay answers from the lane alone."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flowproof_cli.mcp.capture import CaptureFile, lane_from_capture, read_entries
from flowproof_cli.mcp.lane import lane_to_document
from flowproof_cli.mcp.stdio import StandinSession, run_standin
from flowproof_cli.mode import Mode
from flowproof_cli.runner.mcp_servers import standin_command

# A minimal newline-delimited JSON-RPC server: logs every method it receives, answers
# requests with {"echo": method}, and sends a progress notification before answering `slow`.
ECHO_SERVER = r"""
import json, sys
log = open(sys.argv[1], "a")
for line in sys.stdin:
    message = json.loads(line)
    log.write(message.get("method", "answer") + "\n"); log.flush()
    if "id" not in message or "method" not in message:
        continue
    if message["method"] == "tools/call" and message["params"]["name"] == "slow":
        print(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": 1, "progress": 1}}), flush=True)
    result = {"protocolVersion": "2025-11-25"} if message["method"] == "initialize" else {
        "echo": message["method"]}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def line(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


def request(request_id, method, params=None) -> dict:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    return {**message, "params": params} if params is not None else message


INIT = request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})


@pytest.fixture
def server(tmp_path: Path) -> tuple[list[str], Path]:
    script = tmp_path / "echo_server.py"
    script.write_text(ECHO_SERVER)
    log = tmp_path / "server.log"
    return [sys.executable, str(script), str(log)], log


def start_standin(session: StandinSession, path: Path) -> subprocess.Popen[bytes]:
    session.write(path)
    return subprocess.Popen(
        standin_command(session.server, path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", "")},  # what an MCP SDK leaves a server
    )


def exchange(process: subprocess.Popen[bytes], message: dict, answers: int = 1) -> list[dict]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line(message))
    process.stdin.flush()
    return [json.loads(process.stdout.readline()) for _ in range(answers)]


def test_record_relays_captures_and_keeps_mocks_away(tmp_path: Path, server) -> None:
    command, log = server
    capture = tmp_path / "files.capture.jsonl"
    session = StandinSession(
        "files", "record", str(capture), command, str(tmp_path), mocks={"rm": {"ok": True}}
    )
    process = start_standin(session, tmp_path / "session.json")
    assert exchange(process, INIT)[0]["result"] == {"protocolVersion": "2025-11-25"}
    progress, answer = exchange(process, request(2, "tools/call", {"name": "slow"}), answers=2)
    assert progress["method"] == "notifications/progress"
    assert answer == {"jsonrpc": "2.0", "id": 2, "result": {"echo": "tools/call"}}
    (mocked,) = exchange(process, request(3, "tools/call", {"name": "rm", "arguments": {}}))
    assert mocked["result"]["structuredContent"] == {"ok": True}
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(timeout=10) == 0

    assert log.read_text().split() == ["initialize", "tools/call"]  # `rm` never reached it
    lane, started = lane_from_capture(read_entries(capture))
    assert started
    assert [c.method for c in lane.calls] == ["initialize", "tools/call", "tools/call"]
    assert lane.calls[2].mocked and not lane.calls[1].mocked
    assert lane.server[0].during == 2


def test_what_was_captured_survives_a_kill(tmp_path: Path, server) -> None:
    command, _ = server
    capture = tmp_path / "c.jsonl"
    process = start_standin(
        StandinSession("files", "record", str(capture), command), tmp_path / "s.json"
    )
    exchange(process, INIT)
    exchange(process, request(2, "tools/list"))
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    lane, _ = lane_from_capture(read_entries(capture))
    assert [(c.method, c.answered) for c in lane.calls] == [
        ("initialize", True),
        ("tools/list", True),
    ]


def test_a_real_server_that_cannot_start_is_named(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    session = StandinSession("files", "record", str(capture), ["/nonexistent/server"])
    assert run_standin(session, io.BytesIO(b""), io.BytesIO()) == 1
    (error,) = [e for e in read_entries(capture) if e["k"] == "error"]
    assert "could not start the real MCP server 'files' (/nonexistent/server)" in error["text"]


def test_the_real_server_gets_pwd_naming_its_folder(tmp_path: Path, monkeypatch) -> None:
    """It runs in the flow's folder; the stand-in (started by the agent, from wherever it
    likes) hands it PWD naming that folder, not its own."""
    script = tmp_path / "pwd_server.py"
    seen = tmp_path / "seen.txt"
    script.write_text(
        f"import os, sys\nopen({str(seen)!r}, 'w').write(os.environ['PWD'] + ' ' + os.getcwd())\n"
    )
    folder = tmp_path / "specs"
    folder.mkdir()
    monkeypatch.setenv("PWD", "/somewhere/else")
    session = StandinSession(
        "files", "record", str(tmp_path / "c.jsonl"), [sys.executable, str(script)], str(folder)
    )
    assert run_standin(session, io.BytesIO(b""), io.BytesIO()) == 0
    assert seen.read_text() == f"{folder.resolve()} {folder.resolve()}"


def recorded_lane(tmp_path: Path, server) -> dict:
    command, _ = server
    capture = tmp_path / "rec.jsonl"
    session = StandinSession("files", "record", str(capture), command)
    stdin = io.BytesIO(line(INIT) + line(request(2, "tools/call", {"name": "slow"})))
    assert run_standin(session, stdin, io.BytesIO()) == 0
    lane, _ = lane_from_capture(read_entries(capture))
    return lane_to_document(lane)


def test_replay_answers_from_the_lane_and_spawns_nothing(tmp_path: Path, server) -> None:
    document = recorded_lane(tmp_path, server)
    log = server[1]
    log.unlink()
    session = StandinSession(
        "files", "replay", str(tmp_path / "rep.jsonl"), ["/nonexistent/server"], lane=document
    )
    stdin = io.BytesIO(
        line({**INIT, "id": "x"}) + line(request("y", "tools/call", {"name": "slow"}))
    )
    stdout = io.BytesIO()
    assert run_standin(session, stdin, stdout) == 0
    answers = [json.loads(raw) for raw in stdout.getvalue().splitlines()]
    assert [a.get("id", a.get("method")) for a in answers] == [
        "x",
        "notifications/progress",
        "y",
    ]
    assert not log.exists()


def test_stand_ins_of_one_server_share_the_lane_position(tmp_path: Path, server) -> None:
    document = recorded_lane(tmp_path, server)
    capture = str(tmp_path / "rep.jsonl")
    first, second = (StandinSession("files", "replay", capture, lane=document) for _ in "ab")
    out = io.BytesIO()
    run_standin(first, io.BytesIO(line(INIT)), out)
    out = io.BytesIO()
    run_standin(second, io.BytesIO(line(request(5, "tools/call", {"name": "slow"}))), out)
    assert json.loads(out.getvalue().splitlines()[-1])["result"] == {"echo": "tools/call"}


def test_a_batch_outside_2025_03_26_is_refused(tmp_path: Path, server) -> None:
    document = recorded_lane(tmp_path, server)
    capture = tmp_path / "rep.jsonl"
    session = StandinSession("files", "replay", str(capture), lane=document)
    stdout = io.BytesIO()
    batch = json.dumps([INIT]).encode() + b"\n"
    run_standin(session, io.BytesIO(batch), stdout)
    (answer,) = [json.loads(raw) for raw in stdout.getvalue().splitlines()]
    assert "only allowed in protocol 2025-03-26" in answer["error"]["message"]
    assert any(e["k"] == "refused" for e in read_entries(capture))


def test_torn_capture_lines_are_skipped(tmp_path: Path) -> None:
    capture = CaptureFile(tmp_path / "c.jsonl", "i")
    capture.append("c", request(1, "tools/list"))
    with (tmp_path / "c.jsonl").open("ab") as stream:
        stream.write(b'{"i": "i", "k": "s", "m": {"jsonrpc"')
    assert [e["k"] for e in read_entries(tmp_path / "c.jsonl")] == ["c"]
    capture.close()


def test_the_stand_in_starts_fast(tmp_path: Path) -> None:
    """It is launched once per server per agent run: it must not load the proxy engine."""
    session = StandinSession("x", "replay", str(tmp_path / "c.jsonl"), lane={"calls": []})
    path = tmp_path / "s.json"
    session.write(path)
    started = time.monotonic()
    subprocess.run(standin_command("x", path), input=b"", check=True, timeout=30)
    assert time.monotonic() - started < 5
    probe = "import sys, flowproof_cli.cli.mcp_stdio; print('mitmproxy' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "False"


def test_the_session_file_reads_its_mode_back(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    StandinSession("x", Mode.REPLAY, str(tmp_path / "c.jsonl"), lane={"calls": []}).write(path)
    assert json.loads(path.read_text())["mode"] == "replay"
    assert StandinSession.read(path).mode is Mode.REPLAY


def test_a_session_file_with_an_unknown_mode_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"server": "x", "mode": "rewind", "capture": "c.jsonl"}))
    done = subprocess.run(
        standin_command("x", path), input=b"", capture_output=True, check=False, timeout=30
    )
    assert done.returncode == 2
    assert done.stderr.decode().strip() == (
        f"error: the MCP stand-in for 'x' cannot read its session {path}: 'rewind' is not a "
        "valid Mode (it exists only while flowproof runs the flow)"
    )


# A server that answers `initialize`, then dies of SIGTERM: what it gets when the agent's
# whole process group is ended, the stand-in included, at the agent's exit.
SIGTERMED_SERVER = r"""
import json, os, signal, sys
message = json.loads(sys.stdin.readline())
result = {"protocolVersion": "2025-11-25"}
print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
os.kill(os.getpid(), signal.SIGTERM)
"""


# ... and one that dies of it while a `tools/call` waits: the flow's timeout ends the group.
SIGTERMED_MID_CALL = SIGTERMED_SERVER.replace("os.kill", "sys.stdin.readline()\nos.kill")
CALL = request(2, "tools/call", {"name": "silent", "arguments": {}})


def record_until(
    tmp_path: Path, script: str, agent_closes_after: float, *, calls: tuple[dict, ...] = ()
) -> list[dict]:
    """The stand-in recording `initialize` (and `calls`) against `script`, the agent closing
    its end `agent_closes_after` seconds after sending them; the capture's error entries."""
    (tmp_path / "server.py").write_text(script)
    capture = tmp_path / "c.jsonl"
    session = StandinSession(
        "files", "record", str(capture), [sys.executable, str(tmp_path / "server.py")]
    )
    read_end, write_end = os.pipe()
    os.write(write_end, b"".join(line(message) for message in (INIT, *calls)))
    closer = threading.Timer(agent_closes_after, os.close, (write_end,))
    closer.start()
    with os.fdopen(read_end, "rb") as stdin:
        assert run_standin(session, stdin, io.BytesIO()) == 0
    closer.join()
    return [entry for entry in read_entries(capture) if entry["k"] == "error"]


def test_a_server_ended_with_the_agents_group_is_no_failure(tmp_path: Path) -> None:
    """The server dies of the group's SIGTERM a moment before the stand-in's own stop:
    the record goes on (it failed opencode's records now and then)."""
    assert record_until(tmp_path, SIGTERMED_SERVER, agent_closes_after=0.3) == []


def test_a_server_killed_while_the_agent_stays_is_still_a_failure(tmp_path: Path) -> None:
    (error,) = record_until(tmp_path, SIGTERMED_SERVER, agent_closes_after=4.0)
    assert (
        "the MCP server 'files' was killed by signal 15 while the agent was still connected"
        in error["text"]
    )


def test_a_server_ended_with_the_group_while_a_call_waits_is_no_failure(tmp_path: Path) -> None:
    """The flow's timeout ends the agent's group while the server still owes an answer: its
    SIGTERM is the group's, and the stand-in's stop follows (CI once reported this server's
    death in place of the timeout)."""
    assert record_until(tmp_path, SIGTERMED_MID_CALL, 0.3, calls=(CALL,)) == []


def test_a_server_killed_while_a_call_waits_and_the_agent_stays_is_a_failure(
    tmp_path: Path,
) -> None:
    (error,) = record_until(tmp_path, SIGTERMED_MID_CALL, 4.0, calls=(CALL,))
    assert (
        "the MCP server 'files' was killed by signal 15 while 1 call waited for its answer "
        "(tools/call silent)" in error["text"]
    ), error["text"]
