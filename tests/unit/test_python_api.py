"""`flowproof.run_flow`: the verdict and the trajectory (tool calls with arguments, reply,
MCP calls) of a real flow, its red paths, and an import that loads nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import flowproof
from flowproof_cli.errors import ConfigError, SpecError, TraceError
from tests.conftest import REPO, clean_environ, run_cli
from tests.e2e.flows import set_agent_env, write_flow
from tests.e2e.mcp_flows import NOTES_V2, PY, client
from tests.e2e.mcp_flows import record as record_mcp
from tests.e2e.mcp_flows import write_flow as write_mcp_flow
from tests.fakes.fake_upstream import FakeUpstream


def recorded(folder: Path) -> Path:
    spec = write_flow(folder)
    with FakeUpstream() as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        result = run_cli("record", spec, env=upstream)
    assert result.code == 0, result.output
    return spec


def test_importing_flowproof_loads_no_runner_and_no_proxy() -> None:
    probe = (
        "import sys, flowproof; flowproof.FlowRun; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mitmproxy', 'pydantic', 'deepdiff', 'flowproof_addons') or m.startswith('flowproof_cli.runner')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=clean_environ(), cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.replace("'", '"')) == []


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'flowproof' has no attribute 'run_flows'"):
        _ = flowproof.run_flows  # type: ignore[attr-defined]


def test_a_flow_without_a_trace_raises_naming_the_record_command(tmp_path: Path) -> None:
    spec = write_flow(tmp_path)
    with pytest.raises(TraceError) as raised:
        flowproof.run_flow(spec)
    assert str(raised.value) == (
        f"no trace at {tmp_path / 'weather.trace.yaml'}; record it first: flowproof record {spec}"
    )


def test_a_bad_spec_raises_with_its_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.flow.yaml"
    spec.write_text("name: bad\nagent: {command: x}\nnope: 1\n")
    with pytest.raises(SpecError, match=r"bad\.flow\.yaml:3"):
        flowproof.run_flow(spec)


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), 0.0, -1.0])
def test_a_timeout_that_is_not_a_finite_positive_number_raises(
    tmp_path: Path, seconds: float
) -> None:
    """`--timeout nan` is refused by click; the API refuses it as well, before any run."""
    spec = write_flow(tmp_path)
    with pytest.raises(ConfigError, match=r"is not a number of seconds > 0\. Fix: "):
        flowproof.run_flow(spec, timeout_s=seconds)


def test_a_gated_flow_is_skipped_with_an_empty_trajectory(tmp_path: Path) -> None:
    spec = write_flow(tmp_path, skip_unless_env=["FLOWPROOF_TEST_UNSET"])
    run = flowproof.run_flow(spec, environ={})
    assert (run.status, run.passed, run.skipped) == (
        "skipped",
        False,
        "not set: FLOWPROOF_TEST_UNSET (skip_unless_env)",
    )
    assert run.tool_calls == [] and run.reply is None and run.mcp_calls == []


def test_missing_traces_lists_what_a_replay_would_skip(tmp_path: Path) -> None:
    first = write_flow(tmp_path, name="first")
    (tmp_path / "deeper").mkdir()
    second = write_flow(tmp_path / "deeper", name="second")
    first.with_name("first.trace.yaml").write_text("version: 1\n")
    assert flowproof.missing_traces(tmp_path) == [second]


@pytest.mark.slow
def test_a_replay_gives_tool_calls_with_arguments_and_the_reply(tmp_path: Path) -> None:
    spec = recorded(tmp_path)
    run = flowproof.run_flow(spec, environ=clean_environ())
    assert run.passed and run.status == "passed" and run.failures == [], run.result.to_json()
    assert [call.name for call in run.tool_calls] == ["get_weather", "get_time"]
    assert run.calls("get_weather")[0].arguments == {"city": "Nairobi"}
    assert run.reply is not None and "sunny" in run.reply
    assert run.divergence is None


def test_keep_going_reaches_the_job(tmp_path: Path) -> None:
    """As `flowproof run --keep-going` (and pytest's `--flowproof-keep-going`)."""
    from flowproof._api import plan_job

    spec = write_flow(tmp_path)
    assert plan_job(spec).keep_going is False
    assert plan_job(spec, keep_going=True).keep_going is True


@pytest.mark.slow
def test_a_divergent_replay_fails_with_the_divergence(tmp_path: Path) -> None:
    spec = recorded(tmp_path)
    set_agent_env(spec, AGENT_SYSTEM="You are terse.")
    run = flowproof.run_flow(spec, environ=clean_environ())
    assert run.status == "failed" and not run.passed
    assert run.failures[0].startswith("divergence at turn 1: message 0 (system) content changed")
    assert run.divergence is not None and run.divergence["turn"] == 1


@pytest.mark.slow
def test_mcp_calls_come_with_their_server_tool_and_arguments(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    env = {"NOTES_DIR": str(notes)}
    agent = client("py_client_v2.py", "--transport", "stdio", "--steps", "write,read")
    server = {"name": "notes", "command": f"{PY} {NOTES_V2}"}
    spec = write_mcp_flow(tmp_path, agent, [server], env=env)
    result = record_mcp(spec)
    assert result.code == 0, result.output
    run = flowproof.run_flow(spec, environ=clean_environ())
    assert run.passed, run.result.to_json()
    tools = [(call.server, call.tool) for call in run.mcp_calls if call.tool is not None]
    assert tools == [("notes", "write_note"), ("notes", "read_note")]  # in the order made
    write = next(call for call in run.mcp_calls if call.tool == "write_note")
    assert write.arguments == {"name": "a.txt", "text": "hello"}
    assert {call.method for call in run.mcp_calls if call.tool is None} >= {"tools/list"}
