"""An agent whose tools are an MCP server, across the turns of a conversation.

The openai-SDK chat loop of tests/e2e/agents/py_mcp_conversation.py keeps one `mcp` 2.x
session open for the whole conversation: turn 1 writes a note (the model asks), turn 2
reads it back, and the agent writes an audit note of each turn itself before it ends the
turn. Recorded against the real notes server (stdio, so the calls cross the stand-in, a
process of its own, and over streamable HTTP, in-process), each call is stored with its
turn; replayed with no server, the same calls in the same turns pass; and an agent that
writes each audit note one turn late (the same calls, in the same order) fails naming the
turn the call moved into and the one it was recorded in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, agent_command
from tests.e2e.mcp_flows import edit_flow, executed, record_with_notes, trace_of, write_notes_flow
from tests.fakes.fake_upstream import DIALECT_CHAT, Reply

pytestmark = pytest.mark.slow

AGENT = AGENTS / "py_mcp_conversation.py"
FIRST, SECOND = "Write hello to a.txt.", "What does a.txt say?"


def model(dialect: str, body: dict) -> Reply:
    """Turn 1: write_note a.txt, then `Saved a.txt.`; turn 2: read_note a.txt, then what it
    says."""
    assert dialect == DIALECT_CHAT
    last = body["messages"][-1]
    if last["role"] == "user" and last["content"] == FIRST:
        return Reply(tool_calls=[("write_note", json.dumps({"name": "a.txt", "text": "hello"}))])
    if last["role"] == "user":
        return Reply(tool_calls=[("read_note", json.dumps({"name": "a.txt"}))])
    if len([m for m in body["messages"] if m["role"] == "user"]) == 1:
        return Reply(text="Saved a.txt.")
    return Reply(text=f"a.txt says {last['content']}.")


def write_spec(folder: Path, server: dict, notes: Path) -> Path:
    agent = {
        "command": agent_command(AGENT),
        "env": {"NOTES_DIR": str(notes), "MCP_MODE": "auto"},
        "conversation": {"until": "^> $"},
    }
    steps = [
        {"user": FIRST},
        {"assert_tool_call": "write_note where name equals a.txt"},
        {"assert": "reply contains Saved"},
        {"user": SECOND},
        {"assert_tool_call": "read_note where name equals a.txt"},
        {"assert": "reply contains hello"},
    ]
    return write_notes_flow(
        folder, "notes bot across turns", agent, server, timeout=60, steps=steps
    )


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_calls_replay_turn_by_turn_and_a_moved_call_names_its_turn(
    transport: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    spec, result = record_with_notes(
        transport, notes, model, lambda server: write_spec(tmp_path, server, notes)
    )
    assert result.code == 0, result.output
    tools = [line.split(" ")[1:3] for line in executed(notes)]
    assert [name for name, *_ in tools] == ["write_note", "write_note", "read_note", "write_note"]

    calls = trace_of(spec)["mcp"]["notes"]["calls"]
    made = [
        (c["params"]["name"], c["params"]["arguments"]["name"], c["conversation_turn"])
        for c in calls
        if c["method"] == "tools/call"
    ]
    assert made == [
        ("write_note", "a.txt", 1),
        ("write_note", "turn-1.log", 1),
        ("read_note", "a.txt", 2),
        ("write_note", "turn-2.log", 2),
    ]
    # The session starts after turn 1 was sent (the agent reads no prompt first): turn 1's.
    assert {c["conversation_turn"] for c in calls if c["method"] != "tools/call"} == {1}

    (notes / "server.log").unlink()
    result = run_cli("run", spec, timeout=180)
    assert result.code == 0, result.output
    assert executed(notes) == []  # answered from the lane, the server never ran

    # The agent now writes each turn's audit note when the next message arrives: the same
    # calls in the same order, so the positional lane matches; turn 1's note moved to turn 2.
    edit_flow(spec, env={"DEFER_TURN_LOG": "1"})
    result = run_cli("run", spec, "--json", timeout=180)
    assert result.code == 1, result.output
    note = next(n for n, c in enumerate(calls, 1) if _names(c) == "turn-1.log")
    [flow] = json.loads(result.stdout)["flows"]
    [failure] = flow["failures"]
    assert failure["message"] == (
        f'conversation turn 2 ("{SECOND}"): MCP server notes, call {note} (tools/call '
        f'write_note) was recorded in conversation turn 1 ("{FIRST}")'
    )
    assert failure["turn"] == 2, failure
    assert [turn["passed"] for turn in flow["conversation"]] == [True, False]  # per turn


def _names(call: dict) -> object:
    """The `name` argument of a tools/call in the lane."""
    return call.get("params", {}).get("arguments", {}).get("name")
