"""`results: [...]` and the structured assertions, end to end: a real agent (the openai SDK
tool loop) calls its tool twice against the fake model, recorded then replayed offline; an
MCP client calls a mocked tool twice. Each red path checks the exit code and the message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult, run_cli
from tests.e2e.flows import write_flow
from tests.e2e.mcp_flows import NOTES_V2, PY, client, edit_flow, record, replay, trace_of
from tests.e2e.mcp_flows import write_flow as write_mcp_flow
from tests.fakes.fake_upstream import FakeUpstream, Reply

pytestmark = pytest.mark.slow

TIMES = ["09:00", {"now": "10:00"}]


def twice_then_answer(dialect: str, body: dict[str, Any]) -> Reply:
    """Ask for get_time twice, then answer with what the tool said each time."""
    said = [m["content"] for m in body.get("messages", []) if m.get("role") == "tool"]
    if len(said) < 2:
        return Reply(tool_calls=[("get_time", "{}")])
    return Reply(text=" ".join(f"Tool said: {text}." for text in said))


def flow(folder: Path, results: list[Any], steps: list[dict[str, Any]] | None = None) -> Path:
    return write_flow(
        folder,
        name="twice",
        tools=[{"name": "get_time", "results": results}],
        steps=steps
        or [
            {"prompt": "What time is it, twice?"},
            {"assert_tool_call": {"call": "get_time", "times": 2}},
            {"assert_tool_call": {"name": "get_time", "args_exact": {}}},
            {"assert": 'reply contains Tool said: 09:00. Tool said: {"now":"10:00"}.'},
        ],
    )


def record_model(spec: Path, fake: FakeUpstream) -> CliResult:
    return run_cli(
        "record",
        spec,
        env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "sk-x"},
    )


def edit_results(spec: Path, results: list[Any]) -> None:
    document = yaml.safe_load(spec.read_text())
    document["tools"][0]["results"] = results
    spec.write_text(yaml.safe_dump(document, sort_keys=False))


def test_each_call_gets_its_result_at_record_and_at_replay(tmp_path: Path) -> None:
    spec = flow(tmp_path, TIMES)
    with FakeUpstream(script=twice_then_answer) as fake:
        result = record_model(spec, fake)
        assert result.code == 0, result.output
        sent = [
            [m["content"] for m in r.body["messages"] if m.get("role") == "tool"]
            for r in fake.model_requests()
        ]
    assert sent == [[], ["09:00"], ["09:00", '{"now":"10:00"}']]  # the real time never left
    trace = yaml.safe_load(spec.with_name("twice.trace.yaml").read_text())
    assert trace["mock_results"] == {"get_time": TIMES}
    assert trace["mocks"] == {}

    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output
    assert replayed.stdout.startswith("PASS: twice flow"), replayed.output


def test_a_call_beyond_the_list_fails_record(tmp_path: Path) -> None:
    spec = flow(tmp_path, ["09:00"])
    with FakeUpstream(script=twice_then_answer) as fake:
        result = record_model(spec, fake)
    assert result.code == 1, result.output
    assert (
        "tool `get_time` was called 2 times but its `results` lists 1. Fix: add a result for "
        "call 2 to `results`, or make the agent call `get_time` at most 1 time(s)"
    ) in result.output
    assert not spec.with_name("twice.trace.yaml").exists()


def test_a_shorter_list_fails_replay_and_says_the_snapshot_moved(tmp_path: Path) -> None:
    spec = flow(tmp_path, TIMES)
    with FakeUpstream(script=twice_then_answer) as fake:
        assert record_model(spec, fake).code == 0
    edit_results(spec, ["09:00"])
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert "tool `get_time` was called 2 times but its `results` lists 1" in result.output
    assert "the spec's tools: mocks differ from the ones snapshotted in the trace" in result.output


def test_a_failing_structured_assertion_exits_1_with_the_closest_call(tmp_path: Path) -> None:
    spec = flow(tmp_path, TIMES)
    with FakeUpstream(script=twice_then_answer) as fake:
        assert record_model(spec, fake).code == 0
    document = yaml.safe_load(spec.read_text())
    document["steps"][1] = {"assert_tool_call": {"call": "get_time", "times": 3}}
    document["steps"][2] = {"assert_tool_call": {"name": "get_time", "args": {"tz": "UTC"}}}
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert (
        "assert_tool_call get_time (times: 3): expected 3 matching call(s), saw 2" in result.output
    )
    assert (
        'assert_tool_call get_time with args {"tz":"UTC"}: get_time was called 2 time(s) but no '
        'call matched; the closest is call 1 (turn 1): tz is absent (expected "UTC")'
    ) in result.output


# -- MCP: the k-th tools/call of the tool ---------------------------------------------------


def mcp_flow(tmp_path: Path, results: list[Any]) -> Path:
    agent = client("py_client_v2.py", "--mode", "legacy", "--steps", "write,read,read")
    server = {
        "name": "notes",
        "command": f"{PY} {NOTES_V2}",
        "tools": [{"name": "read_note", "results": results}],
    }
    return write_mcp_flow(tmp_path, agent, [server], env={"NOTES_DIR": str(tmp_path / "notes")})


def mocked_texts(spec: Path) -> list[str]:
    lane = trace_of(spec)["mcp"]["notes"]
    return [
        json.dumps(call["result"]["content"][0]["text"])
        for call in lane["calls"]
        if call.get("mocked")
    ]


def test_an_mcp_tool_answers_call_by_call(tmp_path: Path) -> None:
    spec = mcp_flow(tmp_path, ["first read", "second read"])
    result = record(spec)
    assert result.code == 0, result.output
    assert mocked_texts(spec) == ['"first read"', '"second read"']
    replayed = replay(spec)
    assert replayed.code == 0, replayed.output

    server = yaml.safe_load(spec.read_text())["mcp"][0]
    edit_flow(spec, mcp=[{**server, "tools": [{"name": "read_note", "results": ["first read"]}]}])
    short = replay(spec)
    assert short.code == 1, short.output
    assert "tool `read_note` was called 2 times but its `results` lists 1" in short.output


def test_an_mcp_call_beyond_the_list_fails_record(tmp_path: Path) -> None:
    spec = mcp_flow(tmp_path, ["only read"])
    result = record(spec)
    assert result.code == 1, result.output
    assert "tool `read_note` was called 2 times but its `results` lists 1" in result.output
