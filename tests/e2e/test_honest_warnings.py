"""Through the CLI: mocked and forbidden tools that nothing intercepts are warned about, at
record and at replay, whether the flow passes or fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.flows import DEFAULT_STEPS, DEFAULT_TOOLS, set_agent_env, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

TOOLS = [*DEFAULT_TOOLS, {"name": "delete_city"}]
STEPS = [*DEFAULT_STEPS, {"assert_no_tool_call": "delete_city"}]
MOCKED = (
    "    warning: tool `get_time` is mocked under `tools:`, but nothing intercepts it: "
    "the agent still runs get_time for real"
)
FORBIDDEN = (
    "    warning: tool `delete_city` is forbidden by `assert_no_tool_call`, but nothing "
    "intercepts it: if the agent calls delete_city, it runs for real before the flow fails"
)


def record(spec: Path) -> str:
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 0, result.output
    return result.stdout


def test_warned_at_record_and_at_replay(tmp_path: Path) -> None:
    spec = write_flow(tmp_path, tools=TOOLS, steps=STEPS)
    recorded = record(spec)
    assert recorded.startswith("PASS: weather flow\n")
    assert MOCKED in recorded and FORBIDDEN in recorded
    # get_time is offered in the agent's own requests: its own tool, not an MCP server's
    assert (
        "get_time is one of the agent's own tools (offered in its model requests, and no MCP "
        "server of the spec provides it). To stop the real call, turn it off in the agent"
    ) in recorded
    # delete_city never was: it may come from an MCP server not declared
    assert "declare delete_city under `mcp:` with a `result:`" in recorded

    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output
    assert MOCKED in replayed.stdout and FORBIDDEN in replayed.stdout

    payload = json.loads(run_cli("run", spec, "--json").stdout)
    notes = payload["flows"][0]["notes"]
    assert [note.split("`")[1] for note in notes if note.startswith("warning: ")] == [
        "get_time",
        "delete_city",
    ]


def test_warned_on_a_failing_replay_too(tmp_path: Path) -> None:
    spec = write_flow(tmp_path, tools=TOOLS, steps=STEPS)
    record(spec)
    set_agent_env(spec, AGENT_MODEL="gpt-4o")
    result = run_cli("run", spec)
    assert result.code == 1
    assert "model changed" in result.stdout
    assert MOCKED in result.stdout and FORBIDDEN in result.stdout


def test_no_warning_without_mocks_or_forbidden_tools(tmp_path: Path) -> None:
    spec = write_flow(tmp_path, tools=[{"name": "get_time"}, {"name": "get_weather"}])
    assert "warning:" not in record(spec)
    # Unmocked, the real get_time's volatile answer diverges: still nothing to warn about.
    result = run_cli("run", spec)
    assert result.code == 1
    assert "message 4 (tool) content changed" in result.stdout
    assert "warning:" not in result.output
