"""One flow's MCP servers as the runner sees them: injection, handles, verdicts."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from flowproof_cli.cli.output import print_flow
from flowproof_cli.mcp.capture import CaptureFile
from flowproof_cli.mcp.flow import McpFlow
from flowproof_cli.mcp.lane import Call, Lane
from flowproof_cli.runner.environment import agent_environment
from flowproof_cli.runner.verdict import FlowResult
from flowproof_cli.spec.models import McpServerSpec
from flowproof_cli.spec.variables import resolve_variables


def servers() -> list[McpServerSpec]:
    return [
        McpServerSpec(name="files-v2", command="python server.py ${ROOT}"),
        McpServerSpec(name="remote", url="https://tools.example.com/mcp"),
    ]


def test_injection_handles_and_session_files(tmp_path: Path) -> None:
    flow = McpFlow(servers(), mode="record", environ={"ROOT": "/srv"}, cwd=tmp_path)
    flow.prepare()
    try:
        assert flow.http_ports() == [("remote", 0)]
        flow.bind("remote", 4321)
        variables = flow.environment()
        assert variables["FLOWPROOF_MCP_URL_REMOTE"] == "http://127.0.0.1:4321/mcp"
        argv = shlex.split(variables["FLOWPROOF_MCP_SERVER_FILES_V2"])
        assert argv[1:5] == ["-m", "flowproof_cli", "mcp-stdio", "--server"]
        session = json.loads(Path(argv[-1]).read_text())
        assert session["command"] == ["python", "server.py", "/srv"]  # ${VAR} resolved
        assert session["mode"] == "record" and session["cwd"] == str(tmp_path)
        handles = flow.handles()
        assert resolve_variables("${flowproof.mcp_url.remote}", {}, handles) == (
            "http://127.0.0.1:4321/mcp"
        )
        env = agent_environment(
            {}, port=1, prompt="p", spec_env={"MY_URL": handles["mcp_url.remote"]}, mcp=variables
        )
        assert env["MY_URL"] == env["FLOWPROOF_MCP_URL_REMOTE"]
    finally:
        flow.close()
    assert not Path(argv[-1]).exists()  # the session files go with the flow


def test_record_names_the_variable_of_a_server_never_contacted(tmp_path: Path) -> None:
    flow = McpFlow(servers(), mode="record", environ={"ROOT": "/srv"}, cwd=tmp_path)
    flow.prepare()
    flow.bind("remote", 4321)
    verdict = flow.verdict()
    flow.close()
    assert verdict.hard == []
    assert verdict.soft == [
        "the agent never spawned flowproof's MCP stand-in for 'files-v2': its MCP config must "
        "launch the command in $FLOWPROOF_MCP_SERVER_FILES_V2 in place of the server's own",
        "the agent never contacted flowproof's MCP listener for 'remote' "
        "(http://127.0.0.1:4321/mcp): its MCP config must point that server at "
        "$FLOWPROOF_MCP_URL_REMOTE",
    ]
    assert set(verdict.lanes) == {"files-v2", "remote"}


def test_replay_judges_the_stand_in_capture_and_stale_lanes(tmp_path: Path) -> None:
    lane = Lane([Call("tools/list", None, {"tools": []}, answered=True)])
    flow = McpFlow(
        servers()[:1],
        mode="replay",
        environ={},
        cwd=tmp_path,
        lanes={"files-v2": lane, "gone": Lane()},
    )
    flow.prepare()
    (server,) = flow.servers
    assert server.capture is not None
    capture = CaptureFile(server.capture, "x")
    capture.append("start")
    capture.append("c", {"jsonrpc": "2.0", "id": 1, "method": "prompts/list"})
    capture.close()
    verdict = flow.verdict()
    flow.close()
    assert verdict.hard == [
        "the MCP server 'files-v2' diverged at call 1: method: recorded tools/list, "
        "replayed prompts/list",
        "the trace has a lane for the MCP server 'gone', which the spec no longer declares "
        "under `mcp`; re-record the flow",
    ]
    assert verdict.calls == 1 and verdict.lanes == {}


def test_calls_are_counted_per_server_and_shown_in_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow = McpFlow(servers(), mode="replay", environ={}, cwd=tmp_path, lanes={})
    flow.prepare()
    (stdio, _) = flow.servers
    assert stdio.capture is not None
    capture = CaptureFile(stdio.capture, "x")
    capture.append("start")
    capture.append("c", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    capture.append("c", {"jsonrpc": "2.0", "id": 2, "method": "ping"})  # never a call
    capture.append("c", {"jsonrpc": "2.0", "method": "notifications/initialized"})
    capture.close()
    verdict = flow.verdict()
    flow.close()
    assert verdict.per_server == {"files-v2": 1, "remote": 0} and verdict.calls == 1

    result = FlowResult("f", Path("f.flow.yaml"), "replay", Path("f.trace.yaml"))
    result.mcp_calls = verdict.per_server
    print_flow(result, with_time=False)
    assert capsys.readouterr().out.splitlines()[1:] == [
        "    mcp: files-v2 1 call(s)",
        "    mcp: remote 0 call(s)",
    ]
    document = json.loads(json.dumps(result.to_json()))
    assert document["mcp_calls"] == {"files-v2": 1, "remote": 0}
    assert FlowResult.from_json(document).mcp_calls == result.mcp_calls
    assert FlowResult("g", Path("g"), "replay", Path("g")).to_json()["mcp_calls"] == {}
