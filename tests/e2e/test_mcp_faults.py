"""MCP faults end to end: a real openai-SDK agent whose tools are the real notes server.

The agent (tests/e2e/agents/py_openai_mcp.py) asks the model (the fake upstream at record,
the cassette at replay) and runs each tool call through an `mcp` 2.x client. Faults are
given through the runner's own parameter (`run_flow(injected=...)`), at record and at
replay alike, as the spec's `faults:` will be; the injected-at-replay case is what
`flowproof chaos` does over a lane recorded without the fault.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.faults.plan import CRASH, HANG, MCP_ERROR, TOOL_ERROR, CallAt, Fault
from flowproof_cli.mode import Mode
from flowproof_cli.runner.flow import run_flow
from flowproof_cli.runner.rerecord import commit
from flowproof_cli.spec import load_spec
from flowproof_cli.trace import trace_path_for
from tests.conftest import clean_environ
from tests.e2e.flows import AGENTS, agent_command
from tests.e2e.mcp_flows import NOTES_V2, PY, executed, http_server, notes_http, trace_of
from tests.fakes.fake_upstream import FakeUpstream, Reply, sequence

pytestmark = pytest.mark.slow

WRITE = ("write_note", json.dumps({"name": "a.txt", "text": "hello"}))
READ = ("read_note", json.dumps({"name": "a.txt"}))


def mcp_fault(kind: str, value: Any = None, *, call: int, times: int = 1) -> Fault:
    return Fault(CallAt("mcp", call, server="notes"), kind, value, times=times)


def write_then_give_up() -> Any:
    """The model's script (a fresh one for each record: a script counts its calls)."""
    return sequence(Reply(tool_calls=[WRITE]), Reply(text="The notes server is down."))


def write_spec(folder: Path, server: dict[str, Any], env: dict[str, str], says: str) -> Path:
    spec = {
        "name": "notes agent",
        "app": "agent",
        "agent": {"command": agent_command(AGENTS / "py_openai_mcp.py"), "env": env},
        "mcp": [server],
        "steps": [{"prompt": "Write hello to a.txt, then read it back."}, {"assert": says}],
    }
    path = folder / "notes.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def record(spec: Path, script: Any, faults: tuple[Fault, ...]) -> None:
    with FakeUpstream(script=script) as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "x"}
        environ = clean_environ(upstream)
        result = asyncio.run(
            run_flow(
                load_spec(spec),
                mode=Mode.RECORD,
                trace_path=trace_path_for(spec),
                environ=environ,
                injected=faults,
            )
        )
    commit([result])
    assert result.failures == [], result.failures


def replay(spec: Path, faults: tuple[Fault, ...] = (), timeout_s: float | None = None) -> list[str]:
    result = asyncio.run(
        run_flow(
            load_spec(spec),
            mode=Mode.REPLAY,
            trace_path=trace_path_for(spec),
            environ=clean_environ(),
            injected=faults,
            timeout_s=timeout_s,
        )
    )
    return [str(failure) for failure in result.failures]


def set_env(spec: Path, **env: str) -> None:
    text = yaml.safe_load(spec.read_text())
    text["agent"]["env"].update(env)
    spec.write_text(yaml.safe_dump(text, sort_keys=False))


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_tool_error_reaches_the_model_which_recovers_at_record_and_replay(
    transport: str, tmp_path: Path
) -> None:
    """The model hears `disk full`, asks for the same write again (the identical retry, which
    the real server runs), then reads the note back. The lane holds the fault."""
    notes = tmp_path / "notes"
    env = {"NOTES_DIR": str(notes)}
    full = (mcp_fault(TOOL_ERROR, "disk full", call=1),)
    script = sequence(
        Reply(tool_calls=[WRITE]),
        Reply(tool_calls=[WRITE]),
        Reply(tool_calls=[READ]),
        Reply(text="The note a.txt says hello."),
    )
    says = "reply contains says hello"
    if transport == "http":
        with http_server(notes_http(), {"NOTES_DIR": str(notes)}) as url:
            spec = write_spec(tmp_path, {"name": "notes", "url": url}, env, says)
            record(spec, script, full)
    else:
        spec = write_spec(tmp_path, {"name": "notes", "command": f"{PY} {NOTES_V2}"}, env, says)
        record(spec, script, full)
    assert [line.split(" ")[1] for line in executed(notes)] == ["write_note", "read_note"]
    trace = trace_of(spec)
    tool_messages = [
        m["content"]
        for t in trace["turns"]
        for m in t["request"]["messages"]
        if m["role"] == "tool"
    ]
    assert tool_messages[0] == "disk full"  # what the model was told, in the recording
    write = next(c for c in trace["mcp"]["notes"]["calls"] if c["method"] == "tools/call")
    assert write["fault"] == "mcp notes call 1: tool_error: disk full"
    assert write["fault_answer"]["result"]["isError"] is True
    assert write["result"]["isError"] is False  # what its retry got from the real server

    (notes / "server.log").unlink()
    assert replay(spec, full) == []
    assert executed(notes) == []

    # Red: the agent now names the note wrongly: the faulted call itself must still match.
    set_env(spec, NAME_PREFIX="tmp-")
    failures = replay(spec, full)
    assert any(
        "diverged at call 3: arguments.name: recorded a.txt, replayed tmp-a.txt" in f
        for f in failures
    ), failures


def test_a_stdio_server_that_crashes_mid_flow_is_judged_by_what_the_agent_does(
    tmp_path: Path,
) -> None:
    """The server dies on the first write: the agent tells the model, which gives up
    politely. Record and replay agree, and the real server never ran the write."""
    notes = tmp_path / "notes"
    env = {"NOTES_DIR": str(notes), "REPORT_TOOL_FAILURES": "1", "TOOL_TIMEOUT": "20"}
    crash = (mcp_fault(CRASH, call=1),)
    server = {"name": "notes", "command": f"{PY} {NOTES_V2}"}
    spec = write_spec(tmp_path, server, env, "reply contains server is down")
    record(spec, write_then_give_up(), crash)
    assert executed(notes) == []
    trace = trace_of(spec)
    write = next(c for c in trace["mcp"]["notes"]["calls"] if c["method"] == "tools/call")
    assert write["fault"] == "mcp notes call 1: crash"
    assert "result" not in write and "fault_answer" not in write
    told = [m for t in trace["turns"] for m in t["request"]["messages"] if m["role"] == "tool"]
    assert told[0]["content"].startswith("tool failed: ")
    assert replay(spec, crash) == []


def test_a_dropped_http_connection_kills_this_sdk_agent_alike_at_record_and_replay(
    tmp_path: Path,
) -> None:
    """Over streamable HTTP a crash drops the connection unanswered. The mcp 2.x client
    does not survive it (its session's task group dies with the agent, whatever the agent
    catches): the flow fails at record with the fault, and at replay with the same fault
    injected over a lane recorded without it, naming the agent's own exit both times."""
    notes = tmp_path / "notes"
    env = {"NOTES_DIR": str(notes), "REPORT_TOOL_FAILURES": "1", "TOOL_TIMEOUT": "20"}
    crash = (mcp_fault(CRASH, call=1),)
    died = "agent error: ExceptionGroup: unhandled errors in a TaskGroup"
    with http_server(notes_http(), {"NOTES_DIR": str(notes)}) as url:
        spec = write_spec(tmp_path, {"name": "notes", "url": url}, env, "reply contains down")
        with pytest.raises(AssertionError, match=died):
            record(spec, write_then_give_up(), crash)
        assert executed(notes) == []  # the dropped write never reached the server
        record(spec, write_then_give_up(), ())
    failures = replay(spec, crash)
    assert len(failures) == 1 and died in failures[0], failures


def test_a_fault_injected_at_replay_over_a_lane_recorded_without_it(tmp_path: Path) -> None:
    """An agent that retries a failed tool call once by itself survives one JSON-RPC error
    on the read (the retry is served the recorded answer); two in a row it does not
    absorb: the model hears of the error, which the recording does not have."""
    notes = tmp_path / "notes"
    env = {"NOTES_DIR": str(notes), "RETRY_TOOL_ERRORS": "1"}
    script = sequence(
        Reply(tool_calls=[WRITE]), Reply(tool_calls=[READ]), Reply(text="It says hello.")
    )
    server = {"name": "notes", "command": f"{PY} {NOTES_V2}"}
    spec = write_spec(tmp_path, server, env, "reply contains says hello")
    record(spec, script, ())
    assert not [c for c in trace_of(spec)["mcp"]["notes"]["calls"] if "fault" in c]

    unavailable = {"code": -32603, "message": "database unavailable"}
    assert replay(spec, (mcp_fault(MCP_ERROR, unavailable, call=2),)) == []
    assert replay(spec, (mcp_fault(TOOL_ERROR, "try later", call=2),)) == []
    failures = replay(spec, (mcp_fault(MCP_ERROR, unavailable, call=2, times=2),))
    assert failures == [
        "divergence at turn 3: message 5 (tool) content changed\n  recorded: hello\n"
        "  replayed: tool failed: MCPError: database unavailable"
    ]

    # A hang: the stand-in never answers; the flow's own timeout ends the agent, and
    # flowproof returns (nothing of it waits on the silent call).
    started = time.monotonic()
    failures = replay(spec, (mcp_fault(HANG, call=2),), timeout_s=10)
    assert time.monotonic() - started < 25
    assert failures == [
        "the agent did not finish within 10 s and was killed; it made 2 model call(s) of 3 recorded"
    ]
