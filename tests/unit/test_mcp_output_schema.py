"""A `result:` mock of a tool whose server declares an outputSchema: built to conform, checked
with jsonschema before it is sent, and the same on stdio, streamable HTTP and at replay."""

from __future__ import annotations

import io
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.mcp.capture import read_entries
from flowproof_cli.mcp.http import Reply
from flowproof_cli.mcp.http_record import HttpRecordSession
from flowproof_cli.mcp.lane import Call, Lane
from flowproof_cli.mcp.mocks import (
    MOCK_REFUSED_CODE,
    MockSchemaError,
    schema_problems,
    tool_result,
)
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.mcp.stdio import StandinSession, run_standin
from flowproof_cli.runner.mcp_servers import McpServers
from flowproof_cli.spec.tools import McpServerSpec

#: What npm server-filesystem declares for write_file (and most of its tools).
FS_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"content": {"type": "string"}},
    "required": ["content"],
    "additionalProperties": False,
}
TOOLS_LIST = {"tools": [{"name": "write_file", "inputSchema": {}, "outputSchema": FS_SCHEMA}]}
FIX = (
    "Fix: give the mock a `content` string, make the mock itself a string, or mock the result "
    "as {structuredContent: ...} that the schema accepts"
)
MISSING = (
    "the MCP server 'files': the `result:` mock of `write_file` does not satisfy the tool's "
    f"outputSchema (outputSchema.required: 'content' is a required property). {FIX}"
)


def build(value: Any, schema: Any = FS_SCHEMA) -> dict[str, Any]:
    return tool_result(value, modern=False, schema=schema, tool="write_file")


def rejection(value: Any, schema: Any = FS_SCHEMA) -> MockSchemaError:
    with pytest.raises(MockSchemaError) as caught:
        build(value, schema)
    return caught.value


# -- building a conforming result ---------------------------------------------------------------


def test_a_plain_string_is_wrapped_in_the_single_property_and_kept_as_text() -> None:
    assert build("written") == {
        "content": [{"type": "text", "text": "written"}],
        "isError": False,
        "structuredContent": {"content": "written"},
    }


def test_a_mapping_the_schema_accepts_is_the_structured_content() -> None:
    assert build({"content": "done"}) == {
        "content": [{"type": "text", "text": '{"content":"done"}'}],
        "isError": False,
        "structuredContent": {"content": "done"},
    }


def test_a_mapping_the_schema_rejects_may_still_fit_the_single_property() -> None:
    wrapper = {
        "type": "object",
        "properties": {"result": {"type": "object"}},
        "required": ["result"],
    }
    assert build({"ok": True}, wrapper)["structuredContent"] == {"result": {"ok": True}}


def test_structured_content_as_written_gets_a_text_block() -> None:
    assert build({"structuredContent": {"content": "x"}}) == {
        "structuredContent": {"content": "x"},
        "content": [{"type": "text", "text": '{"content":"x"}'}],
        "isError": False,
    }


def test_a_content_list_that_is_itself_the_structured_shape_is_both() -> None:
    media = {
        "type": "object",
        "properties": {"content": {"type": "array"}},
        "required": ["content"],
    }
    value = {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]}
    assert build(value, media) == {**value, "structuredContent": value}


def test_an_error_result_and_an_unusable_schema_are_not_checked() -> None:
    failed = {"content": [{"type": "text", "text": "no such file"}], "isError": True}
    assert build(failed) == failed
    assert build({"ok": True}, {"type": 12})["structuredContent"] == {"ok": True}  # invalid
    remote = {"$ref": "http://127.0.0.1:9/schema.json"}  # never fetched
    assert build({"ok": True}, remote)["structuredContent"] == {"ok": True}


def test_without_a_schema_nothing_changes() -> None:
    assert build("plain", None) == {
        "content": [{"type": "text", "text": "plain"}],
        "isError": False,
    }
    assert build({"ok": True}, None)["structuredContent"] == {"ok": True}


# -- red paths: named schema path and fix ---------------------------------------------------------


def test_a_mapping_without_the_required_property_is_named() -> None:
    error = rejection({"ok": True})
    assert (error.path, error.reason) == (
        "outputSchema.required",
        "'content' is a required property",
    )
    assert str(error).endswith(FIX)


def test_a_value_of_the_wrong_type_names_the_property_path() -> None:
    error = rejection(42)
    assert (error.path, error.reason) == (
        "outputSchema.properties.content.type",
        "42 is not of type 'string'",
    )


def test_a_content_list_without_structured_content_is_named() -> None:
    error = rejection({"content": [{"type": "text", "text": "hi"}]})
    assert error.path == "outputSchema"
    assert error.reason == "the result has a `content` list and no `structuredContent`"


def test_invalid_structured_content_as_written_and_an_extra_property() -> None:
    assert rejection({"structuredContent": {"content": 1}}).path == (
        "outputSchema.properties.content.type"
    )
    extra = rejection({"content": "x", "more": 1})
    assert extra.path == "outputSchema.additionalProperties"
    assert "'more' was unexpected" in extra.reason


def test_the_fix_lists_required_properties_of_a_wider_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "size": {"type": "integer"}},
        "required": ["path", "size"],
    }
    error = rejection("x", schema)
    assert error.path == "outputSchema.type"
    assert "give the mock the properties `path` (string), `size` (integer)" in str(error)


def test_schema_problems_lists_every_rejected_mock() -> None:
    schemas = {"write_file": FS_SCHEMA, "other": None}
    mocks = {"write_file": {"ok": True}, "other": {"ok": True}, "unlisted": 1}
    assert schema_problems("files", mocks, schemas) == [MISSING]
    assert schema_problems("files", {"write_file": "fine"}, schemas) == []


# -- the same on every transport ----------------------------------------------------------------

CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "write_file", "arguments": {"path": "/x", "content": "hi"}},
}
LIST_SERVER = r"""
import json, sys
tools = json.loads(sys.argv[1])
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message and message.get("method") == "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": tools}), flush=True)
    elif "id" in message and "method" in message:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}), flush=True)
"""


def stdio_record(tmp_path: Path, mock: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The stand-in at record before a server that lists write_file with FS_SCHEMA."""
    script = tmp_path / "server.py"
    script.write_text(LIST_SERVER)
    capture = tmp_path / "files.capture.jsonl"
    command = [sys.executable, str(script), json.dumps(TOOLS_LIST)]
    session = StandinSession(
        "files", "record", str(capture), command, str(tmp_path), {"write_file": mock}
    )
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    stdout = _Lines()
    stdin = _Paced(listing, CALL, stdout)
    assert run_standin(session, stdin, stdout) == 0
    (answer,) = [m for m in stdout.messages() if m.get("id") == 7]
    return answer, read_entries(capture)


class _Lines(io.BytesIO):
    """The stand-in's stdout; `listed` is set once the server's tools/list answer is out."""

    def __init__(self) -> None:
        super().__init__()
        self.listed = threading.Event()

    def write(self, data: Any) -> int:
        written = super().write(data)
        if b'"id":1,' in bytes(data) or b'"id": 1,' in bytes(data):
            self.listed.set()
        return written

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.getvalue().splitlines()]


class _Paced(io.BytesIO):
    """The agent's side: it calls the tool only after it got the tool list, as SDKs do."""

    def __init__(self, listing: dict[str, Any], call: dict[str, Any], stdout: _Lines):
        super().__init__()
        self._listing, self._call, self._stdout = listing, call, stdout

    def __iter__(self):  # type: ignore[override]
        yield (json.dumps(self._listing) + "\n").encode()
        assert self._stdout.listed.wait(30), "the server never answered tools/list"
        yield (json.dumps(self._call) + "\n").encode()

    def readline(self, limit: int | None = -1) -> bytes:  # how the stand-in reads its stdin
        if not hasattr(self, "_paced"):
            self._paced = iter(self)
        return next(self._paced, b"")


def http_record(mock: Any) -> tuple[dict[str, Any], list[str]]:
    session = HttpRecordSession("files", url="http://real/mcp", mocks={"write_file": mock})
    session.on_request(
        "POST", {}, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    )
    session.on_upstream_message({"jsonrpc": "2.0", "id": 1, "result": TOOLS_LIST}, via=1)
    reply = session.on_request("POST", {}, json.dumps(CALL).encode())
    assert isinstance(reply, Reply) and reply.status == 200
    return json.loads(reply.body), session.errors


def replayed(mock: Any) -> tuple[dict[str, Any], Replayer]:
    lane = Lane(
        calls=[
            Call("tools/list", None, TOOLS_LIST, answered=True),
            Call("tools/call", CALL["params"], {"content": []}, answered=True, mocked=True),
        ]
    )
    replayer = Replayer("files", lane, {"write_file": mock})
    replayer.receive({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    (answer,) = [e.message for e in replayer.receive(CALL) if e.final]
    return answer, replayer


def test_a_conforming_mock_is_answered_alike_on_stdio_http_and_replay(tmp_path: Path) -> None:
    expected = {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "content": [{"type": "text", "text": "ok"}],
            "isError": False,
            "structuredContent": {"content": "ok"},
        },
    }
    stdio_answer, entries = stdio_record(tmp_path, "ok")
    http_answer, errors = http_record("ok")
    replay_answer, replayer = replayed("ok")
    assert stdio_answer == http_answer == replay_answer == expected
    assert [e for e in entries if e["k"] == "error"] == [] and errors == []
    assert replayer.failures() == []


def test_a_rejected_mock_fails_alike_on_stdio_http_and_replay(tmp_path: Path) -> None:
    refused = {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": MOCK_REFUSED_CODE, "message": f"flowproof: {MISSING}"},
    }
    stdio_answer, entries = stdio_record(tmp_path, {"ok": True})
    assert stdio_answer == refused  # an error the agent's SDK reports, not a crash
    assert [e["text"] for e in entries if e["k"] == "error"] == [MISSING]
    http_answer, errors = http_record({"ok": True})
    assert http_answer == refused and errors == [MISSING]
    replay_answer, replayer = replayed({"ok": True})
    assert replay_answer == refused
    assert replayer.failures() == [MISSING]


# -- knowable before the agent starts: replay only ------------------------------------------------


def fs_server(mock: Any) -> McpServerSpec:
    return McpServerSpec(
        name="files", command="node server.js", tools=[{"name": "write_file", "result": mock}]
    )


def test_replay_refuses_a_rejected_mock_before_the_agent_starts(tmp_path: Path) -> None:
    lane = Lane(calls=[Call("tools/list", None, TOOLS_LIST, answered=True)])
    flow = McpServers(
        [fs_server({"ok": True})], mode="replay", environ={}, cwd=tmp_path, lanes={"files": lane}
    )
    with pytest.raises(SpecError) as caught:
        flow.prepare()
    flow.close()
    assert str(caught.value) == MISSING
    assert caught.value.exit_code == 2


def test_replay_and_record_accept_what_they_cannot_reject_up_front(tmp_path: Path) -> None:
    lane = Lane(calls=[Call("tools/list", None, TOOLS_LIST, answered=True)])
    fine = McpServers(
        [fs_server("ok")], mode="replay", environ={}, cwd=tmp_path, lanes={"files": lane}
    )
    fine.prepare()
    fine.close()
    record = McpServers([fs_server({"ok": True})], mode="record", environ={}, cwd=tmp_path)
    record.prepare()  # the schema is known only once the live server lists its tools
    record.close()
    assert fine.servers[0].session_file is not None and record.servers[0].session_file is not None
