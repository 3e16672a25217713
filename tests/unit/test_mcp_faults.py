"""MCP faults: which tools/call a fault hits, what answers it, at record and at replay."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.faults.plan import CRASH, HANG, MCP_ERROR, TOOL_ERROR, CallAt, Fault
from flowproof_cli.mcp.capture import faults_applied, lane_from_capture, read_entries, unanswered
from flowproof_cli.mcp.faults import McpFaults, fault_answer
from flowproof_cli.mcp.http import Drop, ForwardRequest, Reply, StreamReply
from flowproof_cli.mcp.http_record import HttpRecordSession
from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.lane import lane_from_document, lane_to_document
from flowproof_cli.mcp.recorder import LaneRecorder
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.mcp.stdio import CRASH_EXIT, StandinSession, run_standin
from flowproof_cli.runner.mcp_servers import McpServers
from flowproof_cli.spec.tools import McpServerSpec
from tests.unit.test_mcp_replayer import INIT, INIT_OK, call_tool, res, text
from tests.unit.test_mcp_stdio import ECHO_SERVER, line


def fault(kind: str, value=None, *, call: int = 2, server: str = "notes", times: int = 1) -> Fault:
    return Fault(CallAt("mcp", call, server=server), kind, value, times=times)


DOWN = fault(TOOL_ERROR, "database unavailable")
RPC = fault(MCP_ERROR, {"code": -32603, "message": "database unavailable"})


def decide(faults: McpFaults, tool: str, **arguments):
    return faults.decide("tools/call", {"name": tool, "arguments": arguments})


# -- counting -------------------------------------------------------------------------------


def test_the_nth_distinct_tools_call_is_faulted_and_its_identical_retry_is_not() -> None:
    faults = McpFaults("notes", [DOWN, fault(HANG, call=1, server="other")])
    assert decide(faults, "read", name="a").fault is None
    assert faults.decide("tools/list", None).fault is None  # not a tools/call: not counted
    first = decide(faults, "write", name="b")
    assert first.fault == DOWN and not first.again
    assert faults.decide("ping", None).fault is None  # nor does it end the wait for a retry
    retry = decide(faults, "write", name="b")
    assert retry.fault is None and retry.retry_of == DOWN
    assert decide(faults, "write", name="b").retry_of is None  # the next same call is new
    assert faults.applied == {DOWN.label: 1}
    assert faults.tool_calls == 3


def test_times_faults_that_many_attempts_then_the_retry_is_served() -> None:
    twice = fault(MCP_ERROR, {"code": -1, "message": "busy"}, call=1, times=2)
    faults = McpFaults("notes", [twice])
    assert decide(faults, "read", name="a").fault == twice
    again = decide(faults, "read", name="a")
    assert again.fault == twice and again.again
    assert decide(faults, "read", name="a").retry_of == twice
    assert faults.applied == {twice.label: 2}


def test_a_different_request_after_the_fault_is_the_next_call() -> None:
    faults = McpFaults("notes", [fault(TOOL_ERROR, "x", call=1), fault(TOOL_ERROR, "y", call=2)])
    assert decide(faults, "read", name="a").fault is not None
    changed = decide(faults, "read", name="b")  # not the retry: call 2, faulted itself
    assert changed.fault is not None and changed.fault.value == "y" and not changed.again


def test_the_answers_of_each_kind() -> None:
    assert fault_answer(RPC) == {"error": {"code": -32603, "message": "database unavailable"}}
    result = fault_answer(DOWN, modern=True)
    assert result == {
        "result": {
            "content": [{"type": "text", "text": "database unavailable"}],
            "isError": True,
            "resultType": "complete",
        }
    }
    assert fault_answer(fault(CRASH)) is None and fault_answer(fault(HANG)) is None


# -- replay ---------------------------------------------------------------------------------


def plain_lane():
    """initialize; read a; write b (recorded without any fault)."""
    recorder = LaneRecorder()
    recorder.client(INIT)
    recorder.server(INIT_OK)
    recorder.client(call_tool(2, "read", name="a"))
    recorder.server(res(2, text("A")))
    recorder.client(call_tool(3, "write", name="b"))
    recorder.server(res(3, text("written")))
    return recorder.lane


def test_an_injected_fault_answers_the_matched_call_and_its_retry_gets_the_recording() -> None:
    replayer = Replayer("notes", plain_lane(), faults=(DOWN,))
    replayer.receive(INIT)
    assert replayer.receive(call_tool(2, "read", name="a"))[0].message["result"] == text("A")
    (faulted,) = replayer.receive(call_tool(3, "write", name="b"))
    assert faulted.message == {"jsonrpc": "2.0", "id": 3, **fault_answer(DOWN)}
    (served,) = replayer.receive(call_tool(4, "write", name="b"))
    assert served.message == {"jsonrpc": "2.0", "id": 4, "result": text("written")}
    assert served.channel == 2 and replayer.last_position == 2
    assert replayer.failures() == [] and replayer.applied == {DOWN.label: 1}


def test_a_faulted_call_whose_arguments_changed_diverges_as_any_call() -> None:
    replayer = Replayer("notes", plain_lane(), faults=(DOWN,))
    replayer.receive(INIT)
    replayer.receive(call_tool(2, "read", name="a"))
    (refused,) = replayer.receive(call_tool(3, "write", name="c"))
    assert refused.message["error"]["code"] == -32099
    assert replayer.divergence == (
        "the MCP server 'notes' diverged at call 3: arguments.name: recorded b, replayed c"
    )


def test_a_crash_is_an_emission_and_a_hang_is_silence() -> None:
    for kind, crashed in ((CRASH, True), (HANG, False)):
        replayer = Replayer("notes", plain_lane(), faults=(fault(kind, call=1),))
        replayer.receive(INIT)
        emissions = replayer.receive(call_tool(2, "read", name="a"))
        assert [e.crash for e in emissions] == ([True] if crashed else [])


def recorded_with(the_fault: Fault, *, retried: bool):
    """Record through the markers a stand-in captures: read a faulted, retried or not."""
    recorder = LaneRecorder()
    recorder.client(INIT)
    recorder.server(INIT_OK)
    answer = fault_answer(the_fault)
    recorder.client(call_tool(2, "read", name="a"), fault=the_fault.label, fault_answer=answer)
    if retried:
        recorder.client(call_tool(3, "read", name="a"), retry_of=the_fault.label)
        recorder.server(res(3, text("A")))
    recorder.client(call_tool(4, "write", name="b"))
    recorder.server(res(4, text("written")))
    return recorder.lane


def test_the_lane_keeps_one_entry_per_call_with_its_fault_and_reads_back() -> None:
    first = fault(TOOL_ERROR, "down", call=1)
    lane = recorded_with(first, retried=True)
    document = lane_to_document(lane)
    entry = document["calls"][1]
    assert entry["fault"] == "mcp notes call 1: tool_error: down"
    assert entry["fault_answer"] == fault_answer(first)
    assert entry["result"] == text("A")
    assert [c["method"] for c in document["calls"]] == ["initialize", "tools/call", "tools/call"]
    assert lane_to_document(lane_from_document(document, "t")) == document
    replayer = Replayer("notes", lane_from_document(document, "t"), faults=(first,))
    for message in (INIT, *(call_tool(n, "read", name="a") for n in (2, 3))):
        replayer.receive(message)
    replayer.receive(call_tool(4, "write", name="b"))
    assert replayer.failures() == [] and replayer.applied == {first.label: 1}


def test_a_retry_the_recording_does_not_have_and_a_fault_the_replay_lacks_diverge() -> None:
    first = fault(TOOL_ERROR, "down", call=1)
    replayer = Replayer("notes", recorded_with(first, retried=False), faults=(first,))
    replayer.receive(INIT)
    replayer.receive(call_tool(2, "read", name="a"))
    replayer.receive(call_tool(3, "read", name="a"))
    assert (
        "the agent retried tools/call read after the fault `mcp notes call 1: tool_error: down`, "
        "and the recording has no retry of it"
    ) in str(replayer.divergence)

    unfaulted = Replayer("notes", recorded_with(first, retried=True))
    unfaulted.receive(INIT)
    unfaulted.receive(call_tool(2, "read", name="a"))
    assert "recorded with the fault `mcp notes call 1: tool_error: down`" in str(
        unfaulted.divergence
    )


# -- the stdio stand-in ---------------------------------------------------------------------


def standin(tmp_path: Path, mode: str, faults: list[Fault], lane=None) -> StandinSession:
    script = tmp_path / "echo.py"
    script.write_text(ECHO_SERVER)
    command = [sys.executable, str(script), str(tmp_path / "server.log")]
    return StandinSession(
        "notes",
        mode,
        str(tmp_path / "notes.capture.jsonl"),
        command if mode == "record" else [],
        lane=lane_to_document(lane) if lane is not None else None,
        faults=[
            {"at": str(f.at), "kind": f.kind, **({"value": f.value} if f.value else {})}
            for f in faults
        ],
    )


def test_record_answers_the_fault_without_forwarding_and_forwards_the_retry(
    tmp_path: Path,
) -> None:
    first = fault(TOOL_ERROR, "down", call=1)
    session = standin(tmp_path, "record", [first])
    stdin = io.BytesIO(
        line(INIT) + line(call_tool(2, "read", name="a")) + line(call_tool(3, "read", name="a"))
    )
    stdout = io.BytesIO()
    assert run_standin(session, stdin, stdout) == 0
    answers = {m["id"]: m for m in map(json.loads, stdout.getvalue().splitlines())}
    assert answers[2]["result"]["isError"] is True
    assert answers[3]["result"] == {"echo": "tools/call"}
    assert (tmp_path / "server.log").read_text().split() == ["initialize", "tools/call"]
    entries = read_entries(tmp_path / "notes.capture.jsonl")
    lane, _ = lane_from_capture(entries)
    assert [c.fault for c in lane.calls] == [None, first.label]
    assert lane.calls[1].result == {"echo": "tools/call"}
    assert faults_applied(entries) == {first.label: 1} and unanswered(entries) == []


def test_a_crash_at_record_stops_the_server_and_ends_the_stand_in(tmp_path: Path) -> None:
    session = standin(tmp_path, "record", [fault(CRASH, call=1)])
    stdin = io.BytesIO(line(INIT) + line(call_tool(2, "read", name="a")) + line(INIT))
    stdout = io.BytesIO()
    assert run_standin(session, stdin, stdout) == CRASH_EXIT
    assert [json.loads(m)["id"] for m in stdout.getvalue().splitlines()] == [1]  # no answer
    entries = read_entries(tmp_path / "notes.capture.jsonl")
    assert unanswered(entries) == [] and not [e for e in entries if e.get("k") == "error"]


def test_a_crash_at_replay_ends_the_stand_in_and_a_new_one_serves_the_retry(
    tmp_path: Path,
) -> None:
    first = fault(CRASH, call=1)
    session = standin(tmp_path, "replay", [first], recorded_with(first, retried=True))
    stdout = io.BytesIO()
    stdin = io.BytesIO(line(INIT) + line(call_tool(2, "read", name="a")))
    assert run_standin(session, stdin, stdout) == CRASH_EXIT
    assert len(stdout.getvalue().splitlines()) == 1
    stdout = io.BytesIO()  # the agent starts the server again and retries the call
    assert run_standin(session, io.BytesIO(line(call_tool(9, "read", name="a"))), stdout) == 0
    assert json.loads(stdout.getvalue()) == {"jsonrpc": "2.0", "id": 9, "result": text("A")}


def test_the_runner_gives_each_server_its_faults_and_refuses_an_undeclared_one(
    tmp_path: Path,
) -> None:
    spec = McpServerSpec(name="notes", command="notes-server")
    servers = McpServers(
        [spec], mode="record", environ={}, cwd=tmp_path, faults=(DOWN, fault(HANG, server="x"))
    )
    with pytest.raises(SpecError, match="names the MCP server 'x', which the spec does not"):
        servers.prepare()
    servers = McpServers([spec], mode="record", environ={}, cwd=tmp_path, faults=(DOWN,))
    servers.prepare()
    try:
        written = json.loads(servers.servers[0].session_file.read_text())  # type: ignore[attr-defined]
        assert written["faults"] == [
            {"at": "mcp notes call 2", "kind": "tool_error", "value": "database unavailable"}
        ]
        assert servers.verdict().applied == {}
    finally:
        servers.close()


# -- streamable HTTP ------------------------------------------------------------------------


def post(session, message: dict):
    return session.on_request("POST", {}, json.dumps(message).encode())


def test_http_record_answers_faults_itself_and_forwards_the_retry() -> None:
    first = fault(TOOL_ERROR, "down", call=1)
    session = HttpRecordSession(
        "notes", url="http://real/mcp", faults=(first, fault(CRASH), fault(HANG, call=3))
    )
    reply = post(session, call_tool(2, "read", name="a"))
    assert isinstance(reply, Reply) and json.loads(reply.body)["result"]["isError"] is True
    assert isinstance(post(session, call_tool(3, "read", name="a")), ForwardRequest)  # retry
    assert isinstance(post(session, call_tool(4, "write", name="b")), Drop)  # the crash
    hung = post(session, call_tool(5, "write", name="c"))
    assert isinstance(hung, StreamReply) and not hung.channel.closed
    session.close()
    assert hung.channel.closed  # nothing of a hang outlives the flow
    assert [c.fault for c in session.lane().calls] == [
        first.label,
        "mcp notes call 2: crash",
        "mcp notes call 3: hang",
    ]
    assert session.applied == {c.fault: 1 for c in session.lane().calls}


def test_http_replay_drops_the_connection_of_a_crash_and_answers_an_error() -> None:
    session = HttpReplaySession("notes", lane=plain_lane(), faults=(RPC, fault(CRASH, call=1)))
    post(session, INIT)
    assert isinstance(post(session, call_tool(2, "read", name="a")), Drop)
    reply = post(session, call_tool(3, "read", name="a"))  # the retry, on a new connection
    assert isinstance(reply, Reply) and json.loads(reply.body)["result"] == text("A")
    reply = post(session, call_tool(4, "write", name="b"))
    assert isinstance(reply, Reply) and json.loads(reply.body)["error"]["code"] == -32603
    assert session.applied == {RPC.label: 1, "mcp notes call 1: crash": 1}


def test_http_record_refuses_a_fault_inside_a_batch() -> None:
    session = HttpRecordSession("notes", url="http://real/mcp", faults=(DOWN,))
    post(session, {**INIT, "params": {"protocolVersion": "2025-03-26"}})
    session.on_upstream_message(res(1, {"protocolVersion": "2025-03-26"}), via=1)
    batch = [call_tool(2, "read", name="a"), call_tool(3, "write", name="b")]
    reply = session.on_request("POST", {}, json.dumps(batch).encode())
    assert isinstance(reply, Reply) and reply.status == 400
    assert session.errors == [
        "the MCP server 'notes': the fault `mcp notes call 2: tool_error: database "
        "unavailable` hit a call inside a JSON-RPC batch"
    ]


def test_a_hang_at_record_answers_nothing_and_repeats_add_no_lane_entry(tmp_path: Path) -> None:
    hang = fault(HANG, call=1, times=2)
    session = standin(tmp_path, "record", [hang])
    session.faults[0]["times"] = 2
    attempts = b"".join(line(call_tool(n, "read", name="a")) for n in (2, 3, 4))
    stdout = io.BytesIO()
    assert run_standin(session, io.BytesIO(line(INIT) + attempts), stdout) == 0
    answered = [json.loads(m)["id"] for m in stdout.getvalue().splitlines()]
    assert answered == [1, 4]  # two silent attempts, then the retry reached the server
    entries = read_entries(tmp_path / "notes.capture.jsonl")
    lane, _ = lane_from_capture(entries)
    assert [(c.method, c.fault) for c in lane.calls] == [
        ("initialize", None),
        ("tools/call", hang.label),
    ]
    assert lane.calls[1].result == {"echo": "tools/call"}
    assert faults_applied(entries) == {hang.label: 2} and unanswered(entries) == []
