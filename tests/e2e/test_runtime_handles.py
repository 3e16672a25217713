"""`${flowproof.*}` handles: an agent that reads its own variable records and replays.

The agent ignores every injected variable; the spec maps the proxy into the variable it
reads (or its command line), and OPENAI_BASE_URL points nowhere to prove the handle did it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, agent_command, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AGENT = AGENTS / "py_custom_base_var.py"
DECOY = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
PASSED_THROUGH = {
    "UNKNOWN_HANDLE": "${flowproof.no_such_handle}",
    "MCP_HANDLE": "${flowproof.mcp_url.notes}",
}


def record_then_replay(spec: Path) -> None:
    with FakeUpstream() as fake:
        recorded = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
        assert recorded.code == 0, recorded.output
        assert len(fake.model_requests()) == 2
    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output
    assert replayed.stdout.startswith("PASS: weather flow")


def test_custom_variable_mapped_with_a_handle(tmp_path: Path) -> None:
    env = {"MY_LLM_BASE": "${flowproof.proxy_url}", **DECOY, **PASSED_THROUGH}
    record_then_replay(write_flow(tmp_path, command=agent_command(AGENT), env=env))


def test_handle_in_the_command_line(tmp_path: Path) -> None:
    command = f"{agent_command(AGENT)} --base ${{flowproof.proxy_url}}"
    record_then_replay(write_flow(tmp_path, command=command, env=dict(DECOY)))


def test_handle_without_v1(tmp_path: Path) -> None:
    command = f"{agent_command(AGENT)} --base ${{flowproof.proxy_url_no_v1}}/v1"
    record_then_replay(write_flow(tmp_path, command=command, env=dict(DECOY)))


def test_without_the_mapping_nothing_reaches_the_proxy(tmp_path: Path) -> None:
    env = {"MY_LLM_BASE": "http://127.0.0.1:9/v1", **PASSED_THROUGH}
    spec = write_flow(tmp_path, command=agent_command(AGENT), env=env)
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 1
    assert "the agent exited with code 1 before making any model call" in result.stdout
    assert "APIConnectionError" in result.stdout


def test_a_changed_pass_through_handle_is_noticed_by_the_agent(tmp_path: Path) -> None:
    # The agent's own check is what the tests above rely on: it must be able to fail.
    env = {"MY_LLM_BASE": "${flowproof.proxy_url}", "UNKNOWN_HANDLE": "${flowproof.proxy_url}"}
    spec = write_flow(tmp_path, command=agent_command(AGENT), env=env)
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 1
    assert "the agent exited with code 4" in result.stdout
    assert "UNKNOWN_HANDLE is 'http://127.0.0.1:" in result.stdout
