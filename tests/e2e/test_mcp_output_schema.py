"""A `result:` mock of a tool with an outputSchema, end to end with real servers and the real
`mcp` SDK client (which validates structured content).

npm server-filesystem (stdio) declares `{content: string}` for write_file; the notes server on
the `mcp` 2.x SDK (streamable HTTP) declares the SDK's `{result: string}` wrapper for
write_note. A conforming mock records and replays; one the schema rejects fails the flow at
record (exit 1) and stops the replay before the agent starts (exit 2), naming the tool, the
schema path and the fix, never the SDK's "Invalid structured content".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.mcp_flows import (
    FILESYSTEM,
    client,
    http_server,
    notes_http,
    record,
    replay,
    trace_of,
    write_flow,
)

pytestmark = pytest.mark.slow

FIX = "or mock the result as {structuredContent: ...} that the schema accepts"
FS_MISSING = (
    "the MCP server 'files': the `result:` mock of `write_file` does not satisfy the tool's "
    "outputSchema (outputSchema.required: 'content' is a required property). Fix: give the "
    f"mock a `content` string, make the mock itself a string, {FIX}"
)


def fs_flow(folder: Path, box: Path, mock: Any) -> Path:
    agent = client(
        "py_client_filesystem.py", "--mode", "legacy", "--roots", str(box), "--steps", "list,write"
    )
    command = f"node {FILESYSTEM / 'index.js'} {box}"
    tools = [{"name": "write_file", "result": mock}]
    return write_flow(folder, agent, [{"name": "files", "command": command, "tools": tools}])


def set_mock(spec: Path, mock: Any) -> None:
    document = yaml.safe_load(spec.read_text())
    document["mcp"][0]["tools"][0]["result"] = mock
    spec.write_text(yaml.safe_dump(document, sort_keys=False))


def mocked_result(spec: Path) -> dict[str, Any]:
    (call,) = [c for c in trace_of(spec)["mcp"]["files"]["calls"] if c.get("mocked")]
    return call["result"]


@pytest.fixture
def box(tmp_path: Path) -> Path:
    folder = tmp_path / "box"
    folder.mkdir()
    return folder


def test_a_conforming_mapping_mock_records_and_replays_over_stdio(
    tmp_path: Path, box: Path
) -> None:
    spec = fs_flow(tmp_path, box, {"content": "written by the mock"})
    recorded = record(spec)
    assert recorded.code == 0, recorded.output
    assert mocked_result(spec)["structuredContent"] == {"content": "written by the mock"}
    assert mocked_result(spec)["content"] == [
        {"type": "text", "text": '{"content":"written by the mock"}'}
    ]
    replayed = replay(spec)
    assert replayed.code == 0, replayed.output
    assert list(box.iterdir()) == []  # the mocked write never reached the server


def test_a_rejected_mock_fails_the_record_over_stdio(tmp_path: Path, box: Path) -> None:
    spec = fs_flow(tmp_path, box, {"ok": True})
    result = record(spec)
    assert result.code == 1, result.output
    assert f"FAIL: mcp flow - {FS_MISSING}" in result.stdout
    assert "Invalid structured content" not in result.output
    assert "no trace written" in result.stdout
    assert list(box.iterdir()) == []


def test_a_rejected_mock_stops_the_replay_before_the_agent_starts(
    tmp_path: Path, box: Path
) -> None:
    spec = fs_flow(tmp_path, box, "ok")
    assert record(spec).code == 0
    set_mock(spec, 42)
    result = replay(spec)
    assert result.code == 2, result.output
    assert result.stderr.strip() == (
        "error: the MCP server 'files': the `result:` mock of `write_file` does not satisfy "
        "the tool's outputSchema (outputSchema.properties.content.type: 42 is not of type "
        f"'string'). Fix: give the mock a `content` string, make the mock itself a string, {FIX}"
    )
    assert result.stdout == ""  # no verdict: the agent never ran


# -- streamable HTTP: the same checks -------------------------------------------------------------

NOTES_MISSING = (
    "the MCP server 'notes': the `result:` mock of `write_note` does not satisfy the tool's "
    "outputSchema (outputSchema.required: 'result' is a required property)"
)


def notes_flow(folder: Path, url: str, mock: Any) -> Path:
    agent = client("py_client_v2.py", "--transport", "http", "--mode", "legacy", "--steps", "write")
    tools = [{"name": "write_note", "result": mock}]
    return write_flow(folder, agent, [{"name": "notes", "url": url, "tools": tools}])


def test_streamable_http_checks_the_mock_the_same_way(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    with http_server(notes_http(), env={"NOTES_DIR": str(notes)}) as url:
        spec = notes_flow(tmp_path, url, "noted")
        recorded = record(spec)
        assert recorded.code == 0, recorded.output
        set_mock(spec, {"ok": True})
        refused = record(spec)
    assert refused.code == 1, refused.output
    assert f"FAIL: mcp flow - {NOTES_MISSING}. Fix: give the mock a `result` string" in (
        refused.stdout
    )
    assert "Invalid structured content" not in refused.output
    replayed = replay(spec)
    assert replayed.code == 2, replayed.output
    assert f"error: {NOTES_MISSING}" in replayed.stderr
    set_mock(spec, "noted")
    assert replay(spec).code == 0
