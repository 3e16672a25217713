"""Garbage on the MCP stand-in: clear errors naming the server and what it sent, no hang.

The stdio stand-in is driven as the agent's SDK drives it, a process on pipes, with every
wait bounded (`WAIT_S`): at record, in front of `mcp_garbage_server.py` (garbage lines,
half-written JSON, a 10 MB line, an endless line, a death mid-call); at replay, fed broken
lines by hand and by hypothesis. Then the real CLI records a flow against the broken server
with a good trace in place: exit 1, the message, the old trace byte for byte.
"""

from __future__ import annotations

import io
import json
import queue
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowproof_cli.mcp import stdio
from flowproof_cli.mcp.capture import lane_from_capture, read_entries
from flowproof_cli.mcp.lane import lane_to_document
from flowproof_cli.mcp.recorder import is_json_rpc
from flowproof_cli.mcp.stdio import MAX_LINE_BYTES, StandinSession, read_lines, run_standin
from flowproof_cli.runner.mcp_servers import standin_command
from tests.conftest import run_cli
from tests.fakes.broken_upstream import BrokenUpstream
from tests.falsifiability.mcp_garbage_server import DEEP_LEVELS, HUGE_BYTES

HERE = Path(__file__).resolve().parent
SERVER = HERE / "mcp_garbage_server.py"
AGENT = HERE / "raw_mcp_agent.py"
WAIT_S = 20.0
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "probe"}}
VIOLATION = "wrote a line that is not JSON-RPC to its stdout"
TOO_DEEP = "the line is JSON nested too deeply to read"
SENT_TOO_DEEP = "the MCP server 'probe': the agent sent a line of JSON nested too deeply to read"


def deep_line(request_id: int = 7) -> bytes:
    """A tools/call whose arguments nest DEEP_LEVELS lists deep: no JSON parser here reads it
    (written as text: json.dumps cannot nest it either)."""
    nested = "[" * DEEP_LEVELS + "]" * DEEP_LEVELS
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", "params": '
        f'{{"name": "probe", "arguments": {{"x": {nested}}}}}}}\n'
    ).encode()


def line(message: Any) -> bytes:
    return (json.dumps(message) + "\n").encode()


class Standin:
    """A stand-in process on pipes; every read waits at most WAIT_S."""

    def __init__(self, session: StandinSession, folder: Path) -> None:
        path = folder / f"{session.server}.session.json"
        session.write(path)
        self.capture = Path(session.capture)
        self.process = subprocess.Popen(
            standin_command(session.server, path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self._lines.put(raw)
        self._lines.put(None)

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def next(self) -> Any:
        """The next line the stand-in writes, parsed; fails after WAIT_S of silence."""
        try:
            raw = self._lines.get(timeout=WAIT_S)
        except queue.Empty:
            pytest.fail(f"no line within {WAIT_S} s: a hang")
        assert raw is not None, "the stand-in closed its stdout"
        return _json(raw)

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """The answer to `message` (other lines skipped); fails after WAIT_S of silence."""
        self.send(line(message))
        while True:
            try:
                raw = self._lines.get(timeout=WAIT_S)
            except queue.Empty:
                pytest.fail(f"no answer to {message['method']} within {WAIT_S} s: a hang")
            assert raw is not None, "the stand-in closed its stdout"
            answer = _json(raw)
            if isinstance(answer, dict) and answer.get("id") == message["id"]:
                return answer

    def close(self) -> tuple[int, str]:
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=WAIT_S)
        return code, self.process.stderr.read().decode("utf-8", "replace")

    def errors(self) -> list[str]:
        return [str(e["text"]) for e in read_entries(self.capture) if e["k"] == "error"]


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


@pytest.fixture
def recording(tmp_path: Path) -> Iterator[Any]:
    """Start a stand-in recording `mcp_garbage_server.py MODE`."""
    started: list[Standin] = []

    def start(mode: str, **extra: Any) -> Standin:
        command = [sys.executable, str(SERVER), mode]
        capture = str(tmp_path / f"{mode}.capture.jsonl")
        session = StandinSession("probe", "record", capture, command, str(tmp_path), **extra)
        started.append(Standin(session, tmp_path))
        return started[-1]

    yield start
    for standin in started:
        if standin.process.poll() is None:
            standin.process.kill()
            standin.process.wait(timeout=WAIT_S)


def handshake(standin: Standin) -> None:
    assert "result" in standin.ask(INIT)
    assert "result" in standin.ask(LIST)


# --- record: a real server that misbehaves -------------------------------------------------


def test_a_well_behaved_server_records_cleanly(recording) -> None:
    standin = recording("ok")
    handshake(standin)
    assert standin.ask(CALL)["result"]["content"][0]["text"] == "probed"
    assert standin.close()[0] == 0
    assert standin.errors() == []


def failed_call(recording: Any, mode: str) -> tuple[Any, str]:
    """The stand-in over the probe server in `mode`, handshaken, its tool call failed as an
    internal error (-32603): the stand-in and the error's message."""
    standin = recording(mode)
    handshake(standin)
    answer = standin.ask(CALL)
    assert answer["error"]["code"] == -32603
    return standin, answer["error"]["message"]


@pytest.mark.parametrize("mode", ["die", "die-partial"])
def test_a_server_dying_mid_call_answers_the_call_and_fails(recording, mode: str) -> None:
    standin, message = failed_call(recording, mode)
    assert message.startswith(
        "flowproof: the MCP server 'probe' exited with code 3 while 1 call waited for its "
        "answer (tools/call probe)"
    )
    assert "its stderr ended with: probe server: fatal error" in message
    if mode == "die-partial":
        assert 'its last line was cut: {"jsonrpc": "2.0", "id": 3, "resu' in message
    later = standin.ask({**CALL, "id": 4})  # after the death: an error at once, not silence
    assert later["error"]["message"].startswith(
        "flowproof: the MCP server 'probe' exited with code 3"
    )
    code, stderr = standin.close()
    assert code == 0
    assert "probe server: fatal error" in stderr  # its stderr still reaches the agent's
    assert standin.errors() == [message.removeprefix("flowproof: ")]


@pytest.mark.parametrize(
    ("mode", "shown"),
    [
        ("banner", "probe server v1 starting"),
        ("garbage", "INFO probe called"),
        ("half", '{"jsonrpc": "2.0", "id": 3, "result": {"content": [{"'),
    ],
)
def test_a_line_that_is_not_json_rpc_fails_and_names_the_line(
    recording, mode: str, shown: str
) -> None:
    standin = recording(mode)
    if mode == "banner":  # before anything was asked: the first call gets the error
        answer = standin.ask(INIT)
    else:
        handshake(standin)
        answer = standin.ask(CALL)
    expected = (
        f"the MCP server 'probe' {VIOLATION}: {shown} (an MCP server writes only JSON-RPC "
        "messages there; its logs belong on stderr)"
    )
    assert answer["error"]["message"] == f"flowproof: {expected}"
    assert standin.ask({**CALL, "id": 9})["error"]["message"] == f"flowproof: {expected}"
    assert standin.close()[0] == 0
    assert standin.errors() == [expected]


def test_a_10_mb_answer_is_relayed_and_recorded_whole(recording) -> None:
    standin = recording("huge")
    handshake(standin)
    answer = standin.ask(CALL)
    assert len(answer["result"]["content"][0]["text"]) == HUGE_BYTES
    assert standin.close()[0] == 0
    assert standin.errors() == []
    lane, _ = lane_from_capture(read_entries(standin.capture))
    assert len(lane.calls[2].result["content"][0]["text"]) == HUGE_BYTES


def test_an_endless_line_is_cut_at_the_limit_and_fails(recording) -> None:
    standin = recording("endless")
    handshake(standin)
    answer = standin.ask(CALL)
    assert answer["error"]["message"].startswith(
        f"flowproof: the MCP server 'probe' wrote a line longer than {MAX_LINE_BYTES} bytes "
        "to its stdout: xxxx"
    )
    assert standin.close()[0] == 0
    assert len(standin.errors()) == 1


def test_json_nested_too_deep_from_the_agent_is_a_parse_error_at_record(recording) -> None:
    """Before, the stand-in died with a RecursionError traceback and the record passed with
    a lane cut short there."""
    standin = recording("ok")
    handshake(standin)
    standin.send(deep_line())
    assert standin.next() == {
        "jsonrpc": "2.0",
        "id": None,  # a line no parser reads has no id to tell
        "error": {"code": -32700, "message": f"flowproof: {TOO_DEEP}"},
    }
    assert standin.ask(CALL)["result"]["content"][0]["text"] == "probed"  # it lives on
    code, stderr = standin.close()
    assert code == 0
    assert "Traceback" not in stderr and "RecursionError" not in stderr, stderr
    assert standin.errors() == [SENT_TOO_DEEP]


def test_json_nested_too_deep_from_the_server_fails_and_is_named(recording) -> None:
    standin, message = failed_call(recording, "deep")
    assert message.startswith(
        "flowproof: the MCP server 'probe' wrote a line of JSON nested too deeply to read to "
        'its stdout: {"jsonrpc": "2.0", "id": 3, "result": [[[['
    )
    code, stderr = standin.close()
    assert code == 0
    assert "Traceback" not in stderr, stderr
    assert standin.errors() == [message.removeprefix("flowproof: ")]


# --- record: a real server that stops answering ----------------------------------------------

SILENT_CALL = "tools/call probe (JSON-RPC id 3)"


def test_a_call_the_server_never_answers_fails_at_its_call_timeout(recording) -> None:
    """Before, the call waited for the agent's own timeout (46 s in the probe), and the
    flow's failure named no server."""
    standin = recording("silent", call_timeout_s=1.0, call_timeout_set=True)
    handshake(standin)
    answer = standin.ask(CALL)
    expected = (
        f"the MCP server 'probe' did not answer {SILENT_CALL} within 1 s (its `call_timeout`)"
    )
    assert answer["error"] == {"code": -32603, "message": f"flowproof: {expected}"}
    later = standin.ask({**CALL, "id": 4})  # the server has failed: answered at once
    assert later["error"]["message"] == f"flowproof: {expected}"
    code, stderr = standin.close()
    assert code == 0
    assert standin.errors() == [expected]
    assert f"flowproof: {expected}" in stderr


def test_the_default_bound_names_how_to_change_it(recording) -> None:
    standin = recording("silent", call_timeout_s=1.0)
    handshake(standin)
    assert standin.ask(CALL)["error"]["message"] == (
        f"flowproof: the MCP server 'probe' did not answer {SILENT_CALL} within 1 s (the "
        "upstream timeout; give the server a `call_timeout` in the spec, or set "
        "--upstream-timeout SECONDS or FLOWPROOF_UPSTREAM_TIMEOUT)"
    )
    assert standin.close()[0] == 0


def test_progress_for_a_call_starts_its_wait_over(recording) -> None:
    """A slow tool that reports progress is not cut at the bound: each notification for the
    call's progressToken starts the wait over, as each SSE event does over HTTP."""
    standin = recording("progress", call_timeout_s=1.5, call_timeout_set=True)
    handshake(standin)
    call = {**CALL, "params": {"name": "probe", "_meta": {"progressToken": "p1"}}}
    answer = standin.ask(call)
    assert answer["result"]["content"][0]["text"] == "probed", answer
    assert standin.close()[0] == 0
    assert standin.errors() == []


# --- replay: what the agent sends ----------------------------------------------------------


@pytest.fixture
def lane(tmp_path: Path) -> dict[str, Any]:
    """The lane of a clean record of the probe server."""
    capture = tmp_path / "ok.capture.jsonl"
    command = [sys.executable, str(SERVER), "ok"]
    session = StandinSession("probe", "record", str(capture), command, str(tmp_path))
    stdin = io.BytesIO(line(INIT) + line(LIST) + line(CALL))
    assert run_standin(session, stdin, io.BytesIO()) == 0
    return lane_to_document(lane_from_capture(read_entries(capture))[0])


def replay(tmp_path: Path, document: dict[str, Any], data: bytes) -> list[dict[str, Any]]:
    capture = tmp_path / "replay.capture.jsonl"
    capture.unlink(missing_ok=True)
    session = StandinSession("probe", "replay", str(capture), lane=document)
    stdout = io.BytesIO()
    assert run_standin(session, io.BytesIO(data), stdout) == 0
    return [json.loads(raw) for raw in stdout.getvalue().splitlines()]


@pytest.mark.parametrize(
    ("sent", "answer_id"),
    [
        ({"jsonrpc": "2.0", "id": 7, "method": 5}, 7),
        ({"jsonrpc": "2.0", "id": "x", "params": {}}, "x"),
        ({"jsonrpc": "2.0", "id": 7, "method": None}, 7),
        (5, None),
        ("tools/call", None),
        (None, None),
    ],
)
def test_a_message_that_is_not_json_rpc_gets_an_invalid_request_error(
    tmp_path: Path, lane: dict[str, Any], sent: Any, answer_id: Any
) -> None:
    (answer,) = replay(tmp_path, lane, line(sent))
    assert answer == {
        "jsonrpc": "2.0",
        "id": answer_id,
        "error": {
            "code": -32600,
            "message": "flowproof: the message is not a JSON-RPC request, notification or response",
        },
    }


def test_an_empty_batch_is_an_invalid_request(tmp_path: Path) -> None:
    """Where batches are allowed (2025-03-26) an empty one still gets its error."""
    params = {"protocolVersion": "2025-03-26"}  # canonical: capabilities are not kept
    document = {"calls": [{"method": "initialize", "params": params, "result": params}]}
    init = {**INIT, "params": {**params, "capabilities": {}}}
    answered, *rest = replay(tmp_path, document, line(init) + b"[]\n")
    (answer,) = rest
    assert answered["result"]["protocolVersion"] == "2025-03-26"
    assert answer == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "flowproof: the batch is empty"},
    }


def test_half_written_json_is_a_parse_error_and_replay_goes_on(
    tmp_path: Path, lane: dict[str, Any]
) -> None:
    broken = line(INIT)[:25] + b"\n"
    first, second = replay(tmp_path, lane, broken + line(INIT))
    assert first["error"] == {"code": -32700, "message": "flowproof: the line is not JSON"}
    assert second["id"] == 1 and "result" in second


def test_an_overlong_line_is_refused_and_the_next_is_served(
    tmp_path: Path, lane: dict[str, Any]
) -> None:
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "' + b"x" * MAX_LINE_BYTES + b'"}\n'
    first, second = replay(tmp_path, lane, huge + line(INIT))
    assert first["id"] is None
    assert first["error"]["message"] == (
        f"flowproof: the line is longer than {MAX_LINE_BYTES} bytes"
    )
    assert second["id"] == 1 and "result" in second


def test_json_nested_too_deep_is_a_parse_error_and_replay_goes_on(
    tmp_path: Path, lane: dict[str, Any]
) -> None:
    """Before, a RecursionError traceback ended the stand-in, and the verdict blamed a lane
    replayed short."""
    first, second = replay(tmp_path, lane, deep_line() + line(INIT))
    assert first == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": f"flowproof: {TOO_DEEP}"},
    }
    assert second["id"] == 1 and "result" in second
    refused = [
        e["text"] for e in read_entries(tmp_path / "replay.capture.jsonl") if e["k"] == "refused"
    ]
    assert refused == [SENT_TOO_DEEP]


@pytest.mark.parametrize("mode", ["record", "replay"])
def test_a_line_the_stand_in_fails_to_handle_is_answered_and_named(
    tmp_path: Path, lane: dict[str, Any], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Whatever raises while a line is handled: the agent gets an error, the flow fails
    naming it, and the next line is served (never the stand-in's end)."""
    target = "_record_client" if mode == "record" else "_replay_message"
    real = getattr(stdio, target)
    calls = {"n": 0}

    def once(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(stdio, target, once)
    capture = tmp_path / f"{mode}-raise.capture.jsonl"
    command = [sys.executable, str(SERVER), "ok"]
    session = (
        StandinSession("probe", "record", str(capture), command, str(tmp_path))
        if mode == "record"
        else StandinSession("probe", "replay", str(capture), lane=lane)
    )
    agent = _PacedAgent([line(INIT), line(INIT)], INIT["id"])
    assert run_standin(session, agent, agent) == 0  # type: ignore[arg-type]
    out = agent.answers()
    text = "the MCP server 'probe': could not handle the agent's line (RuntimeError: boom)"
    assert out[0] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": f"flowproof: {text}"},
    }
    assert out[1]["id"] == 1 and "result" in out[1]
    kinds = [(e["k"], e.get("text")) for e in read_entries(capture) if "text" in e]
    assert kinds == [("error" if mode == "record" else "refused", text)]


def test_a_10_mb_request_is_matched_like_any_other(tmp_path: Path, lane: dict[str, Any]) -> None:
    big = {**CALL, "params": {"name": "probe", "arguments": {"blob": "y" * HUGE_BYTES}}}
    answers = replay(tmp_path, lane, line(INIT) + line(LIST) + line(big))
    assert answers[-1]["id"] == 3
    assert "diverged at call 3" in answers[-1]["error"]["message"]


# --- hypothesis: any line into the reader --------------------------------------------------

IDS = st.integers(-5, 10**6) | st.text(max_size=6)
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | VALUES,
        "method": st.sampled_from(["initialize", "tools/call", "tools/list", "ping"]) | VALUES,
        "params": VALUES,
        "result": VALUES,
        "error": VALUES,
    },
)
LINES = st.one_of(
    st.binary(max_size=60).filter(lambda raw: b"\n" not in raw and b"\r" not in raw),
    VALUES.map(lambda value: json.dumps(value).encode()),
    MESSAGES.map(lambda message: json.dumps(message).encode()),
    MESSAGES.map(lambda message: json.dumps(message).encode()[: len(json.dumps(message)) // 2]),
)


@FUZZ
@given(lines=st.lists(st.tuples(LINES, st.booleans()), max_size=8))
def test_any_lines_get_well_formed_answers_and_each_request_exactly_one(
    tmp_path_factory: pytest.TempPathFactory, lines: list[tuple[bytes, bool]]
) -> None:
    """Each line is sent as it is, or (flag) as a message carrying a fresh unique id."""
    folder = tmp_path_factory.mktemp("fuzz")
    document = {"calls": [{"method": "tools/list", "result": {"tools": []}}]}
    data, expected_ids = b"", []
    for number, (raw, with_id) in enumerate(lines):
        message = _json(raw)
        if with_id and isinstance(message, dict):
            message["id"] = f"fuzz-{number}"
            raw = json.dumps(message).encode()
            is_request = isinstance(message.get("method"), str)
            if is_request or not ({"result", "error"} & message.keys()):  # not a response
                expected_ids.append(message["id"])
        data += raw + b"\n"
    answers = replay(folder, document, data)
    for answer in answers:  # this lane has no server events: every line out is an answer
        assert answer.get("jsonrpc") == "2.0" and "id" in answer
        assert ("result" in answer) is not ("error" in answer)
    got = [a.get("id") for a in answers if isinstance(a.get("id"), str)]
    for request_id in expected_ids:
        assert got.count(request_id) == 1, (request_id, answers)


@FUZZ
@given(data=st.binary(max_size=400), limit=st.integers(2, 40))
def test_read_lines_gives_every_byte_back_or_cuts_only_overlong_lines(
    data: bytes, limit: int
) -> None:
    pieces = list(read_lines(io.BytesIO(data), limit))
    whole = [raw for raw, fits in pieces if fits]
    expected = [
        raw
        for raw in io.BytesIO(data)
        if len(raw) < limit or (len(raw) == limit and raw.endswith(b"\n"))
    ]
    assert whole == expected
    for raw, fits in pieces:
        assert len(raw) <= limit
        assert fits or (len(raw) == limit and not raw.endswith(b"\n"))


class _PacedAgent:
    """The agent's side of an in-process stand-in: it sends its lines one by one and closes
    its stdin only once the last request was answered (or WAIT_S passed)."""

    def __init__(self, lines: list[bytes], last_id: Any) -> None:
        self._lines = list(lines)
        self._last_id = last_id
        self.answered = threading.Event()
        self.out = b""

    def readline(self, limit: int = -1) -> bytes:
        if self._lines:
            return self._lines.pop(0)
        self.answered.wait(WAIT_S)
        return b""

    def __iter__(self) -> Iterator[bytes]:
        while raw := self.readline():
            yield raw

    def write(self, data: bytes) -> int:
        self.out += data
        for raw in data.splitlines():
            message = _json(raw)
            if isinstance(message, dict) and message.get("id") == self._last_id:
                self.answered.set()
        return len(data)

    def flush(self) -> None:
        pass

    def answers(self) -> list[Any]:
        return [m for m in map(_json, self.out.splitlines()) if isinstance(m, dict)]


NOTIFICATIONS = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": st.sampled_from(["notifications/message", "x/y"])},
    optional={"params": st.dictionaries(st.text(max_size=4), SCALARS, max_size=3)},
).map(lambda message: json.dumps(message).encode())
SERVER_LINES = st.lists(
    st.binary(max_size=40).filter(lambda raw: b"\n" not in raw) | NOTIFICATIONS, max_size=5
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=SERVER_LINES)
def test_any_server_output_before_an_answer_is_relayed_or_named_never_a_hang(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    """Whatever a live server writes before its answer: the call is answered (the real
    answer, or an error once a line was not JSON-RPC), and the failure is named once."""
    folder = tmp_path_factory.mktemp("server-fuzz")
    emitted = folder / "lines.bin"
    emitted.write_bytes(b"".join(raw + b"\n" for raw in lines))
    command = [sys.executable, str(SERVER), "lines", str(emitted)]
    capture = folder / "c.jsonl"
    session = StandinSession("probe", "record", str(capture), command, str(folder))
    agent = _PacedAgent([line(INIT), line(LIST), line(CALL)], CALL["id"])
    assert run_standin(session, agent, agent) == 0  # type: ignore[arg-type]
    assert agent.answered.is_set(), "the call got no answer: a hang"
    errors = [e["text"] for e in read_entries(capture) if e["k"] == "error"]
    (answer,) = [m for m in agent.answers() if m.get("id") == CALL["id"]]
    bad = [raw for raw in lines if raw.strip() and not is_json_rpc(_json(raw))]
    if bad:
        assert len(errors) == 1 and errors[0].startswith(f"the MCP server 'probe' {VIOLATION}")
        assert answer["error"]["message"] == f"flowproof: {errors[0]}"
    else:
        assert errors == []
        assert answer["result"]["content"][0]["text"] == "probed"


# --- the real CLI --------------------------------------------------------------------------


def _flow(
    folder: Path,
    mode: str,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    **server: Any,
) -> Path:
    spec = {
        "name": "garbage mcp probe",
        "app": "agent",
        "timeout": timeout,
        "agent": {
            "command": shlex.join([sys.executable, str(AGENT)]),
            "env": {"AGENT_SEEN": str(folder / "seen.json"), **(env or {})},
        },
        "mcp": [
            {
                "name": "probe",
                "command": shlex.join([sys.executable, str(SERVER), mode]),
                **server,
            }
        ],
        "steps": [{"prompt": "Use the probe."}],
    }
    path = folder / "probe.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _record(spec: Path, *extra: str):
    environ = {"FLOWPROOF_AGENT_UPSTREAM": "http://127.0.0.1:9/v1"}
    return run_cli("record", spec, *extra, env=environ, timeout=45)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("die", "the MCP server 'probe' exited with code 3 while 1 call waited for its answer"),
        ("half", f"the MCP server 'probe' {VIOLATION}: " + '{"jsonrpc": "2.0", "id": 3'),
        ("garbage", f"the MCP server 'probe' {VIOLATION}: INFO probe called"),
    ],
)
def test_record_with_a_broken_server_fails_and_keeps_the_trace(
    tmp_path: Path, mode: str, message: str
) -> None:
    spec = _flow(tmp_path, "ok")
    assert _record(spec).code == 0
    trace = spec.with_name("probe.trace.yaml")
    good = trace.read_bytes()
    _flow(tmp_path, mode)
    result = _record(spec, "--yes")
    assert result.code == 1, result.output
    assert result.stdout.startswith(f"FAIL: garbage mcp probe - {message}")
    assert "no trace written" in result.stdout
    assert "Traceback" not in result.output
    seen = json.loads(spec.with_name("seen.json").read_text())
    assert seen["answers"]["tools/call"]["error"]["message"].startswith(f"flowproof: {message}")
    assert trace.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".flowproof",
        "probe.flow.yaml",
        "probe.trace.yaml",
        "seen.json",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["record", "run"])
def test_json_nested_too_deep_fails_the_flow_naming_it(tmp_path: Path, mode: str) -> None:
    """The probe's case: before, the stand-in died with a RecursionError traceback; the
    replay failed blaming a lane replayed short, and the record passed, writing that lane."""
    spec = _flow(tmp_path, "ok")
    assert _record(spec).code == 0
    trace = spec.with_name("probe.trace.yaml")
    good = trace.read_bytes()
    _flow(tmp_path, "ok", env={"AGENT_DEEP": str(DEEP_LEVELS)})
    result = _record(spec, "--yes") if mode == "record" else run_cli("run", spec, timeout=45)
    assert result.code == 1, result.output
    assert result.stdout.startswith(f"FAIL: garbage mcp probe - {SENT_TOO_DEEP}"), result.output
    assert "ran short" not in result.output
    assert "Traceback" not in result.output and "RecursionError" not in result.output
    answers = _seen(tmp_path)
    assert answers["deep"]["error"] == {"code": -32700, "message": f"flowproof: {TOO_DEEP}"}
    assert answers["tools/call"]["result"]["content"][0]["text"] == "probed"
    assert trace.read_bytes() == good


@pytest.mark.slow
@pytest.mark.parametrize(
    ("server", "extra", "bound"),
    [
        ({"call_timeout": 1}, (), "1 s (its `call_timeout`)"),
        (
            {},
            ("--upstream-timeout", "1"),
            "1 s (the upstream timeout; give the server a `call_timeout` in the spec, or set "
            "--upstream-timeout SECONDS or FLOWPROOF_UPSTREAM_TIMEOUT)",
        ),
    ],
    ids=["call_timeout", "upstream-timeout"],
)
def test_record_with_a_server_that_stops_answering_fails_at_the_bound(
    tmp_path: Path, server: dict[str, Any], extra: tuple[str, ...], bound: str
) -> None:
    """The flow's own timeout is 60 s and the CLI is given 45: only the call's bound can end
    it in time, and the failure names the server, the call and the bound."""
    spec = _flow(tmp_path, "ok")
    assert _record(spec).code == 0
    good = spec.with_name("probe.trace.yaml").read_bytes()
    _flow(tmp_path, "silent", **server)
    result = _record(spec, "--yes", *extra)
    assert result.code == 1, result.output
    message = f"the MCP server 'probe' did not answer {SILENT_CALL} within {bound}"
    assert result.stdout.startswith(f"FAIL: garbage mcp probe - {message}"), result.output
    assert "Traceback" not in result.output
    assert _seen(tmp_path)["tools/call"]["error"]["message"] == f"flowproof: {message}"
    assert spec.with_name("probe.trace.yaml").read_bytes() == good


@pytest.mark.slow
def test_a_flow_timeout_while_a_call_waits_names_the_call(tmp_path: Path) -> None:
    """The flow's timeout comes before the call's bound: the failure says which server was
    still silent, on which call, and its bound."""
    spec = _flow(tmp_path, "silent", timeout=3)
    result = _record(spec)
    assert result.code == 1, result.output
    assert result.stdout.startswith("FAIL: garbage mcp probe - the agent did not finish within 3 s")
    assert (
        f"also: the MCP server 'probe' had not answered {SILENT_CALL} when the agent stopped "
        "waiting (the call's bound: 120 s)"
    ) in result.stdout, result.output


# --- streamable HTTP: a real server that answers garbage -----------------------------------


def _http_flow(folder: Path, url: str, timeout: float = 60, **server: Any) -> Path:
    spec = yaml.safe_load(_flow(folder, "ok").read_text())
    spec["mcp"] = [{"name": "probe", "url": url, **server}]
    spec["timeout"] = timeout
    path = folder / "probe.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _seen(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "seen.json").read_text())["answers"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (
            {"mode": "garbage"},
            "the MCP server 'probe' answered call 1 (initialize) with a body that is not JSON-RPC "
            "(HTTP 200, application/json): \\x00\ufffd<html>upstream \ufffd exploded{{{",
        ),
        (
            {"mode": "sse-cut"},
            "the MCP server 'probe' sent an SSE event that is not JSON-RPC in its answer to "
            'call 1 (initialize): {"id":"chatcmpl-1","object":"chat.completion.chunk"',
        ),
        (
            {"mode": "drop"},
            "flowproof could not reach the real MCP server 'probe' at {url}: HTTP/1 protocol "
            "error: peer closed connection without sending complete message body",
        ),
    ],
)
def test_record_over_http_with_a_broken_server_fails_and_names_it(
    tmp_path: Path, failure: dict[str, Any], message: str
) -> None:
    with BrokenUpstream(failure.pop("mode"), **failure) as upstream:
        url = f"{upstream.base_url}/mcp"
        result = _record(_http_flow(tmp_path, url))
    assert result.code == 1, result.output
    assert result.stdout.startswith(f"FAIL: garbage mcp probe - {message.replace('{url}', url)}")
    assert "no trace written" in result.stdout
    assert "Traceback" not in result.output
    assert not (tmp_path / "probe.trace.yaml").exists()


@pytest.mark.slow
def test_an_http_error_without_json_rpc_is_kept_and_replayed_as_that_error(
    tmp_path: Path,
) -> None:
    """A 500 whose body is JSON but not JSON-RPC: the call is answered with that failure at
    record and again at replay, never left unanswered (a replay would wait for ever)."""
    with BrokenUpstream("status", status=500) as upstream:
        spec = _http_flow(tmp_path, f"{upstream.base_url}/mcp")
        assert _record(spec).code == 0
    recorded = _seen(tmp_path)
    lane = yaml.safe_load((tmp_path / "probe.trace.yaml").read_text())["mcp"]["probe"]
    first = lane["calls"][0]
    assert (first["method"], first["status"], first["error"]["code"]) == ("initialize", 500, -32603)
    assert "Incorrect API key provided" in first["error"]["message"]
    result = run_cli("run", spec, timeout=45)
    assert result.code == 0, result.output
    assert _seen(tmp_path)["initialize"][0] == recorded["initialize"][0] == 500


@pytest.mark.slow
def test_record_over_http_with_a_silent_server_ends_with_the_flow_and_says_why(
    tmp_path: Path,
) -> None:
    with BrokenUpstream("hang") as upstream:
        url = f"{upstream.base_url}/mcp"
        result = _record(_http_flow(tmp_path, url, timeout=3))
    assert result.code == 1, result.output
    assert (
        "the MCP server 'probe' had not answered initialize (JSON-RPC id 1) when the agent "
        "stopped waiting (the call's bound: 120 s)"
    ) in result.stdout, result.output
    assert url  # the server is named by its spec name; its URL is in the spec


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hang", "sse-hang"], ids=["before-answering", "inside-sse"])
def test_record_over_http_with_a_silent_server_ends_at_the_upstream_timeout(
    tmp_path: Path, mode: str
) -> None:
    """The flow's own timeout is 60 s and the CLI is given 45: only the upstream timeout,
    which bounds the real MCP server's answer as it bounds the model's, can end it in time:
    a server silent before its answer, or inside the SSE stream that carries it."""
    with BrokenUpstream(mode) as upstream:
        url = f"{upstream.base_url}/mcp"
        result = _record(_http_flow(tmp_path, url), "--upstream-timeout", "1")
    assert result.code == 1, result.output
    assert result.stdout.startswith(
        "FAIL: garbage mcp probe - the MCP server 'probe' did not answer initialize (JSON-RPC id "
        "1) within 1 s (the upstream timeout; give the server a `call_timeout` in the spec, or "
        "set --upstream-timeout SECONDS or FLOWPROOF_UPSTREAM_TIMEOUT)"
    ), result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "probe.trace.yaml").exists()


@pytest.mark.slow
def test_record_over_http_with_a_silent_server_ends_at_its_call_timeout(tmp_path: Path) -> None:
    """The server's own `call_timeout` bounds its calls over HTTP as over stdio."""
    with BrokenUpstream("hang") as upstream:
        url = f"{upstream.base_url}/mcp"
        result = _record(_http_flow(tmp_path, url, call_timeout=1))
    assert result.code == 1, result.output
    assert result.stdout.startswith(
        "FAIL: garbage mcp probe - the MCP server 'probe' did not answer initialize (JSON-RPC id "
        "1) within 1 s (its `call_timeout`)"
    ), result.output
    assert not (tmp_path / "probe.trace.yaml").exists()
