"""One flow's MCP servers as the runner sees them (runner/mcp_servers.py): injection,
handles, verdicts."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.cli.output import print_flow
from flowproof_cli.mcp.capture import CaptureFile
from flowproof_cli.mcp.lane import Call, Lane
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.runner import mcp_servers
from flowproof_cli.runner.environment import agent_environment
from flowproof_cli.runner.mcp_servers import HttpServer, McpServers, StdioServer
from flowproof_cli.spec.tools import McpServerSpec
from flowproof_cli.spec.variables import resolve_variables
from flowproof_cli.verdict import FlowResult


def servers() -> list[McpServerSpec]:
    return [
        McpServerSpec(name="files-v2", command="python server.py ${ROOT}"),
        McpServerSpec(name="remote", url="https://tools.example.com/mcp"),
    ]


def judged_after(flow: McpServers, server: Any, *messages: dict[str, Any]) -> Any:
    """The stand-in of `server` captured as having received `messages`: the flow's verdict,
    the flow closed."""
    assert server.capture is not None
    capture = CaptureFile(server.capture, "x")
    capture.append("start")
    for message in messages:
        capture.append("c", message)
    capture.close()
    verdict = flow.verdict()
    flow.close()
    return verdict


def test_injection_handles_and_session_files(tmp_path: Path) -> None:
    flow = McpServers(servers(), mode="record", environ={"ROOT": "/srv"}, cwd=tmp_path)
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
    flow = McpServers(servers(), mode="record", environ={"ROOT": "/srv"}, cwd=tmp_path)
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
    flow = McpServers(
        servers()[:1],
        mode="replay",
        environ={},
        cwd=tmp_path,
        lanes={"files-v2": lane, "gone": Lane()},
    )
    flow.prepare()
    (server,) = flow.servers
    verdict = judged_after(
        flow,
        server,
        {"jsonrpc": "2.0", "id": 1, "method": "prompts/list"},
    )
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
    flow = McpServers(servers(), mode="replay", environ={}, cwd=tmp_path, lanes={})
    flow.prepare()
    (stdio, _) = flow.servers
    verdict = judged_after(
        flow,
        stdio,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},  # never a call
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
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


def test_a_stdio_lane_is_replayed_once_per_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture is read and the lane replayed against it once, whatever the verdict
    reads of it (divergence, ran short, calls)."""
    built: list[Replayer] = []

    class Counted(Replayer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(mcp_servers, "Replayer", Counted)
    lane = Lane(
        [
            Call("tools/list", None, {"tools": []}, answered=True),
            Call("prompts/list", None, {"prompts": []}, answered=True),
        ]
    )
    flow = McpServers(
        servers()[:1], mode="replay", environ={}, cwd=tmp_path, lanes={"files-v2": lane}
    )
    flow.prepare()
    (server,) = flow.servers
    assert isinstance(server, StdioServer)
    verdict = judged_after(
        flow,
        server,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert len(built) == 1
    assert verdict.hard == []
    assert verdict.soft == [
        "the MCP server 'files-v2' ran short: the agent made 1 of the 2 recorded call(s) "
        "(never made: call 2 (prompts/list))"
    ]


def test_each_transport_gets_the_session_of_the_flow_mode(tmp_path: Path) -> None:
    """Record forwards to the resolved url; replay answers from the trace's lane."""
    lane = Lane([Call("tools/list", None, {"tools": []}, answered=True)])
    record = McpServers(servers(), mode="record", environ={"ROOT": "/srv"}, cwd=tmp_path)
    replay = McpServers(servers(), mode="replay", environ={}, cwd=tmp_path, lanes={"remote": lane})
    for flow in (record, replay):
        flow.prepare()
    try:
        (_, recorded), (_, replayed) = record.servers, replay.servers
        assert isinstance(recorded, HttpServer) and isinstance(replayed, HttpServer)
        assert record.bind("remote", 1) is recorded.session
        assert recorded.session.mode == "record" and replayed.session.mode == "replay"
        assert recorded.session.lane().calls == [] and replayed.session.lane() is lane
    finally:
        record.close()
        replay.close()
