"""A real model-SDK agent whose tools are MCP tools: both boundaries in one trace.

The openai SDK agent (tests/e2e/agents/py_openai_mcp.py) asks the model (the fake upstream
at record, the cassette at replay) and runs each tool call through an `mcp` 2.x client on
the real notes server (at record) or flowproof's lane (at replay).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, agent_command
from tests.e2e.mcp_flows import edit_flow, executed, record_with_notes, trace_of, write_notes_flow
from tests.fakes.fake_upstream import Reply, sequence

pytestmark = pytest.mark.slow

AGENT = AGENTS / "py_openai_mcp.py"


def model_script():
    return sequence(
        Reply(tool_calls=[("write_note", json.dumps({"name": "a.txt", "text": "hello"}))]),
        Reply(tool_calls=[("read_note", json.dumps({"name": "a.txt"}))]),
        Reply(text="The note a.txt says hello."),
    )


def write_spec(folder: Path, server: dict, env: dict[str, str]) -> Path:
    steps = [
        {"prompt": "Write hello to a.txt, then read it back."},
        {"assert_tool_call": "write_note where name equals a.txt"},
        {"assert_tool_call": "read_note"},
        {"assert": "reply contains says hello"},
    ]
    agent = {"command": agent_command(AGENT), "env": env}
    return write_notes_flow(folder, "notes agent", agent, server, steps=steps)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_model_and_mcp_boundaries_in_one_trace(transport: str, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    env = {"NOTES_DIR": str(notes), "MCP_MODE": "auto"}
    spec, result = record_with_notes(
        transport, notes, model_script(), lambda server: write_spec(tmp_path, server, env)
    )
    assert result.code == 0, result.output
    assert [line.split(" ")[1] for line in executed(notes)] == ["write_note", "read_note"]

    trace = trace_of(spec)
    assert len(trace["turns"]) == 3  # the model boundary
    calls = trace["mcp"]["notes"]["calls"]  # the tool boundary, same trace
    tool_calls = [c["params"]["name"] for c in calls if c["method"] == "tools/call"]
    assert tool_calls == ["write_note", "read_note"]
    assert calls[0]["method"] == "server/discover"

    (notes / "server.log").unlink()
    (notes / "a.txt").unlink()
    if transport == "stdio":
        edit_flow(spec, mcp=[{"name": "notes", "command": "/nonexistent/notes-server"}])
    result = run_cli("run", spec, timeout=180)
    assert result.code == 0, result.output
    assert executed(notes) == [] and not (notes / "a.txt").exists()

    # The agent now threads the model's argument into the tool call wrongly: the model asked
    # for the same thing, so the MCP lane is where it shows, at the exact call and path.
    edit_flow(spec, env={"NAME_PREFIX": "tmp-"})
    result = run_cli("run", spec, timeout=180)
    assert result.code == 1, result.output
    assert "diverged at call 3: arguments.name: recorded a.txt, replayed tmp-a.txt" in result.output
