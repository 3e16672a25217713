"""MCP servers as a record/replay boundary, end to end with real servers and real clients.

Every case records against the real server, stops or removes it, and replays green; the
notes server's own log proves what reached it (a mocked tool never does, replay never does).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.mcp_flows import (
    FILESYSTEM,
    NOTES_V1,
    NOTES_V2,
    PY,
    client,
    edit_flow,
    everything_http,
    executed,
    free_port,
    http_server,
    notes_http,
    record,
    replay,
    stdio_notes_flow,
    trace_of,
    write_flow,
)

pytestmark = pytest.mark.slow

ALL_NOTES_STEPS = "write,read,slow,elicit,sample,roots,touch"


@dataclass
class Case:
    """One client against one server over one transport."""

    name: str
    agent: list[str]
    server: str  # "stdio" or "http"
    stdio_command: list[str] = field(default_factory=list)
    http_argv: Callable[[], list[str]] | None = None
    server_name: str = "notes"
    notes: bool = True  # the notes server: check its log


def notes_case(name: str, script: str, transport: str, *args: str, server: Path = NOTES_V2) -> Case:
    return Case(
        name,
        client(script, "--transport", transport, "--steps", ALL_NOTES_STEPS, *args),
        transport,
        stdio_command=[PY, str(server)],
        http_argv=lambda: notes_http(server),
    )


CASES = [
    notes_case("v2-legacy-stdio", "py_client_v2.py", "stdio", "--mode", "legacy"),
    notes_case("v2-auto-stdio", "py_client_v2.py", "stdio", "--mode", "auto"),
    notes_case("v2-legacy-http", "py_client_v2.py", "http", "--mode", "legacy"),
    notes_case("v2-auto-http", "py_client_v2.py", "http", "--mode", "auto"),
    notes_case("v1-stdio", "py_client_v1.py", "stdio"),
    notes_case("v1-http", "py_client_v1.py", "http"),
    notes_case(
        "v2-auto-http-v1-server", "py_client_v2.py", "http", "--mode", "auto", server=NOTES_V1
    ),
    Case(
        "everything-stdio",
        client("py_client_everything.py", "--transport", "stdio", "--mode", "legacy"),
        "stdio",
        stdio_command=[str(Path("tests/mcp_fixtures/run_everything.sh").resolve()), "stdio"],
        server_name="everything",
        notes=False,
    ),
    Case(
        "everything-http",
        client("py_client_everything.py", "--transport", "http", "--mode", "auto"),
        "http",
        http_argv=everything_http,
        server_name="everything",
        notes=False,
    ),
]


def server_entry(case: Case, url: str | None, tools: list[dict[str, Any]] | None = None) -> dict:
    entry: dict[str, Any] = {"name": case.server_name}
    if case.server == "stdio":
        entry["command"] = " ".join(case.stdio_command)
    else:
        entry["url"] = url
    if tools:
        entry["tools"] = tools
    return entry


def run_case(case: Case, tmp_path: Path, mocks: list[dict[str, Any]] | None = None) -> Path:
    """Record with the real server running, then make sure it is gone."""
    notes = tmp_path / "notes"
    env = {"NOTES_DIR": str(notes)}
    if case.server == "http":
        assert case.http_argv is not None
        with http_server(case.http_argv(), env) as url:
            spec = write_flow(tmp_path, case.agent, [server_entry(case, url, mocks)], env=env)
            result = record(spec)
    else:
        spec = write_flow(tmp_path, case.agent, [server_entry(case, None, mocks)], env=env)
        result = record(spec)
    assert result.code == 0, result.output
    return spec


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_record_then_replay_without_the_server(case: Case, tmp_path: Path) -> None:
    mocks = [{"name": "touch_note", "result": "touched by flowproof"}] if case.notes else None
    spec = run_case(case, tmp_path, mocks)
    notes = tmp_path / "notes"
    lane = trace_of(spec)["mcp"][case.server_name]
    assert lane["calls"], lane
    if case.notes:
        recorded = executed(notes)
        assert any(line.startswith("tools/call write_note") for line in recorded)
        assert not any("touch_note" in line for line in recorded)  # the mock never reached it
        shutil.rmtree(notes)
        notes.mkdir()
    if case.server == "stdio":
        edit_flow(spec, mcp=[{**trace_entry(spec), "command": "/nonexistent/server --gone"}])

    result = replay(spec)
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS"), result.output
    if case.notes:
        assert executed(notes) == []  # nothing ran: not the tools, not the mocked one


def trace_entry(spec: Path) -> dict[str, Any]:
    return yaml.safe_load(spec.read_text())["mcp"][0]


def fs_client(box: Path, steps: str) -> list[str]:
    """The scripted filesystem client, rooted at `box`, making `steps`."""
    return client(
        "py_client_filesystem.py", "--mode", "legacy", "--roots", str(box), "--steps", steps
    )


def test_filesystem_side_effect_only_at_record_and_never_for_a_mock(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    agent = fs_client(box, "list,write,read")
    command = f"node {FILESYSTEM / 'index.js'} {box}"
    spec = write_flow(tmp_path, agent, [{"name": "files", "command": command}], name="fs")
    assert record(spec).code == 0
    assert (box / "a.txt").read_text() == "hello"  # the real side effect, at record
    (box / "a.txt").unlink()
    result = replay(spec)
    assert result.code == 0, result.output
    assert list(box.iterdir()) == []  # replay wrote nothing

    mocked = write_flow(
        tmp_path,
        fs_client(box, "list,write"),
        [{"name": "files", "command": command, "tools": [{"name": "write_file", "result": "ok"}]}],
        name="fs-mock",
    )
    assert record(mocked).code == 0
    assert list(box.iterdir()) == []  # the mocked write never reached the server
    assert replay(mocked).code == 0
    assert list(box.iterdir()) == []


# -- red paths ------------------------------------------------------------------------------


@pytest.fixture
def notes_flow(tmp_path: Path) -> Path:
    agent = client("py_client_v2.py", "--mode", "legacy", "--steps", "write,read,sample")
    spec = stdio_notes_flow(tmp_path, agent)
    result = record(spec)
    assert result.code == 0, result.output
    return spec


def test_a_divergent_argument_names_the_path(notes_flow: Path) -> None:
    edit_flow(notes_flow, env={"NOTE_NAME": "b.txt"})
    result = replay(notes_flow)
    assert result.code == 1, result.output
    assert (
        "the MCP server 'notes' diverged at call 3: arguments.name: recorded a.txt, replayed b.txt"
        in result.output
    )


def test_an_extra_call_fails(notes_flow: Path) -> None:
    steps = ("--mode", "legacy", "--steps", "write,read,sample,read")
    edit_flow(notes_flow, agent=client("py_client_v2.py", *steps))
    result = replay(notes_flow)
    assert result.code == 1, result.output
    assert (
        "the MCP server 'notes' diverged at call 6: an extra call (tools/call read_note); "
        "the recording has 5 call(s)" in result.output
    )


def test_a_missing_call_fails(notes_flow: Path) -> None:
    edit_flow(
        notes_flow, agent=client("py_client_v2.py", "--mode", "legacy", "--steps", "write,read")
    )
    result = replay(notes_flow)
    assert result.code == 1, result.output
    assert (
        "the MCP server 'notes' ran short: the agent made 4 of the 5 recorded call(s)"
        in result.output
    )
    assert "(never made: call 5 (tools/call summarize_note))" in result.output


def test_a_changed_answer_to_a_sampling_request_fails(notes_flow: Path) -> None:
    patched = (
        "import runpy, sys; sys.path.insert(0, sys.argv[1]); import client_common;"
        " client_common.CANNED_SAMPLE = 'another summary'; sys.argv = sys.argv[2:];"
        " runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    fixtures = str(NOTES_V2.parent)
    edit_flow(
        notes_flow,
        agent=[
            PY,
            "-c",
            patched,
            fixtures,
            f"{fixtures}/py_client_v2.py",
            "--mode",
            "legacy",
            "--steps",
            "write,read,sample",
        ],
    )
    result = replay(notes_flow)
    assert result.code == 1, result.output
    assert (
        "the MCP server 'notes' diverged at its request 1 (sampling/createMessage): "
        "result.content.text: recorded a canned summary from the client, replayed another summary"
        in result.output
    )


def test_a_server_the_agent_never_contacts_fails_record(tmp_path: Path) -> None:
    # The agent talks to the real server directly: its config ignores the injected variable.
    agent = client(
        "py_client_v2.py",
        "--mode",
        "legacy",
        "--steps",
        "write",
        "--name",
        "direct",
        "--server-cmd",
        f"{PY} {NOTES_V2}",
    )
    spec = stdio_notes_flow(tmp_path, agent)
    result = record(spec)
    assert result.code == 1, result.output
    assert "the agent never spawned flowproof's MCP stand-in for 'notes'" in result.output
    assert "$FLOWPROOF_MCP_SERVER_NOTES" in result.output
    assert not spec.with_name("mcp.trace.yaml").exists()

    with http_server(notes_http(), {"NOTES_DIR": str(tmp_path / "notes")}) as url:
        direct = client(
            "py_client_v2.py",
            "--transport",
            "http",
            "--steps",
            "write",
            "--name",
            "direct",
            "--url",
            url,
        )
        http_spec = write_flow(tmp_path, direct, [{"name": "notes", "url": url}], name="http")
        result = record(http_spec)
    assert result.code == 1, result.output
    assert "the agent never contacted flowproof's MCP listener for 'notes'" in result.output
    assert "$FLOWPROOF_MCP_URL_NOTES" in result.output


# -- one lane, either transport ---------------------------------------------------------------


@pytest.mark.parametrize(("recorded_over", "replayed_over"), [("stdio", "http"), ("http", "stdio")])
def test_a_lane_is_transport_blind(recorded_over: str, replayed_over: str, tmp_path: Path) -> None:
    env = {"NOTES_DIR": str(tmp_path / "notes")}
    steps = ("--mode", "legacy", "--steps", "write,slow,sample,touch")

    def agent(transport: str) -> list[str]:
        return client("py_client_v2.py", "--transport", transport, *steps)

    if recorded_over == "http":
        with http_server(notes_http(), env) as url:
            spec = write_flow(tmp_path, agent("http"), [{"name": "notes", "url": url}], env=env)
            assert record(spec).code == 0
    else:
        spec = write_flow(
            tmp_path, agent("stdio"), [{"name": "notes", "command": f"{PY} {NOTES_V2}"}], env=env
        )
        assert record(spec).code == 0
    server = (
        {"name": "notes", "url": "http://127.0.0.1:9/mcp", "port": free_port()}
        if replayed_over == "http"
        else {"name": "notes", "command": "/nonexistent/server"}
    )
    edit_flow(spec, agent=agent(replayed_over), mcp=[server])
    result = replay(spec)
    assert result.code == 0, result.output


def test_the_upstream_timeout_bounds_silence_in_an_sse_answer_not_its_length(
    tmp_path: Path,
) -> None:
    """slow_count streams a progress event every 0.1 s for 2 s, twice the 1 s upstream
    timeout: each event starts the wait over, so the record passes with the whole answer."""
    env = {"NOTES_DIR": str(tmp_path / "notes")}
    steps = ("--mode", "legacy", "--steps", "slow", "--slow-n", "20")
    agent = client("py_client_v2.py", "--transport", "http", *steps)
    with http_server(notes_http(), env) as url:
        spec = write_flow(tmp_path, agent, [{"name": "notes", "url": url}], env=env)
        result = record(spec, FLOWPROOF_UPSTREAM_TIMEOUT="1")
    assert result.code == 0, result.output
    calls = trace_of(spec)["mcp"]["notes"]["calls"]
    (slow,) = [call for call in calls if call["method"] == "tools/call"]
    assert slow["result"]["content"][0]["text"] == "counted to 20"
