"""MCP lanes: canonical requests, positional matching messages, mocks, the lane document."""

from __future__ import annotations

import pytest

from flowproof_cli.errors import TraceError
from flowproof_cli.mcp.canonical import Kind, canonical_request, kind_of
from flowproof_cli.mcp.lane import Call, Lane, ServerEvent, lane_from_document, lane_to_document
from flowproof_cli.mcp.matching import compare_answer, compare_call
from flowproof_cli.mcp.mocks import mock_answer, output_schemas, tool_result

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
    "progressToken": 7,
}


def call(method: str, params: dict | None = None, request_id: int = 1) -> dict:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (call("tools/list"), Kind.REQUEST),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, Kind.NOTIFICATION),
        ({"jsonrpc": "2.0", "id": 3, "result": {}}, Kind.RESPONSE),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "x"}}, Kind.RESPONSE),
        ([call("ping")], Kind.INVALID),
        ({"jsonrpc": "2.0"}, Kind.INVALID),
    ],
)
def test_kinds(message, kind) -> None:
    assert kind_of(message) is kind


def test_initialize_keeps_the_protocol_version_only() -> None:
    method, params = canonical_request(
        call(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"sampling": {}},
                "clientInfo": {"name": "agent", "version": "9.9.9"},
            },
        )
    )
    assert (method, params) == ("initialize", {"protocolVersion": "2025-11-25"})


def test_volatile_meta_is_dropped_protocol_meta_kept() -> None:
    _, params = canonical_request(
        call("tools/call", {"name": "t", "arguments": {"a": 1}, "_meta": MODERN_META})
    )
    assert params == {
        "name": "t",
        "arguments": {"a": 1},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    }
    _, legacy = canonical_request(
        call("tools/call", {"name": "t", "arguments": {}, "_meta": {"progressToken": "x"}})
    )
    assert legacy == {"name": "t", "arguments": {}}


def recorded(method: str, params: dict | None) -> Call:
    return Call(method=method, params=params, result={}, answered=True)


def test_argument_drift_names_the_first_divergent_path() -> None:
    old = recorded("tools/call", {"name": "read_file", "arguments": {"path": "a.txt"}})
    assert (
        compare_call(old, "tools/call", {"name": "read_file", "arguments": {"path": "b.txt"}})
        == "arguments.path: recorded a.txt, replayed b.txt"
    )
    nested = recorded("tools/call", {"name": "t", "arguments": {"q": {"items": [1, 2]}}})
    assert (
        compare_call(nested, "tools/call", {"name": "t", "arguments": {"q": {"items": [1, 3]}}})
        == "arguments.q.items.1: recorded 2, replayed 3"
    )


def test_method_tool_and_version_come_first() -> None:
    old = recorded("tools/call", {"name": "read_file", "arguments": {"path": "a"}})
    assert (
        compare_call(old, "tools/list", None) == "method: recorded tools/call, replayed tools/list"
    )
    assert (
        compare_call(old, "tools/call", {"name": "write_file", "arguments": {"path": "b"}})
        == "tool: recorded read_file, replayed write_file"
    )
    init = recorded("initialize", {"protocolVersion": "2025-06-18"})
    assert (
        compare_call(init, "initialize", {"protocolVersion": "2025-11-25"})
        == "protocolVersion: recorded 2025-06-18, replayed 2025-11-25"
    )
    assert compare_call(init, "initialize", {"protocolVersion": "2025-06-18"}) is None


def test_other_params_and_answers() -> None:
    old = recorded("resources/read", {"uri": "note://a"})
    assert (
        compare_call(old, "resources/read", {"uri": "note://b"})
        == "params.uri: recorded note://a, replayed note://b"
    )
    answer = {"result": {"content": {"type": "text", "text": "hi"}, "model": "m"}}
    changed = {"result": {"content": {"type": "text", "text": "bye"}, "model": "m"}}
    assert compare_answer(answer, changed) == "result.content.text: recorded hi, replayed bye"
    assert compare_answer(answer, {"error": {"code": 1}}) == (
        "answer: recorded a result, replayed an error"
    )
    assert compare_answer(None, changed) is None


def test_mock_results() -> None:
    assert tool_result({"ok": True}, modern=False) == {
        "content": [{"type": "text", "text": '{"ok":true}'}],
        "isError": False,
        "structuredContent": {"ok": True},
    }
    assert tool_result("done", modern=True)["resultType"] == "complete"
    shaped = {"content": [{"type": "text", "text": "as written"}], "isError": True}
    assert tool_result(shaped, modern=False) == shaped
    wrapper = {"type": "object", "properties": {"result": {"type": "string"}}}
    assert tool_result("x", modern=False, schema=wrapper)["structuredContent"] == {"result": "x"}
    schemas = output_schemas([{"tools": [{"name": "t", "outputSchema": wrapper}]}])
    answer = mock_answer(call("tools/call", {"name": "t", "arguments": {}}), {"t": "y"}, schemas)
    assert answer is not None and answer["result"]["structuredContent"] == {"result": "y"}
    assert mock_answer(call("tools/call", {"name": "u", "arguments": {}}), {"t": 1}) is None


def test_lane_document_round_trip_and_shape() -> None:
    lane = Lane(
        calls=[
            Call("initialize", {"protocolVersion": "2025-11-25"}, {"b": 1, "a": 2}, answered=True),
            Call("tools/call", {"name": "t", "arguments": {}}, None, answered=True, mocked=True),
            Call("subscriptions/listen", {}),
            Call("x", None, None, {"code": -1, "message": "no"}, True, status=400),
        ],
        server=[
            ServerEvent(after=1, notification={"method": "n"}, during=2, stream=True),
            ServerEvent(after=1, request={"method": "roots/list"}, answer={"result": {}}),
        ],
    )
    document = lane_to_document(lane)
    assert list(document["calls"][0]["result"]) == ["a", "b"]  # sorted for review
    assert "result" not in document["calls"][2] and "error" not in document["calls"][2]
    assert document["calls"][1]["result"] is None  # a null result is still an answer
    again = lane_from_document(document, "t")
    assert again == lane
    assert lane_to_document(Lane()) == {"calls": []}


def test_malformed_lanes_are_named() -> None:
    with pytest.raises(TraceError, match="call 1 is malformed"):
        lane_from_document({"calls": [{"params": {}}]}, "x.trace.yaml")
    with pytest.raises(TraceError, match="server message 1 is malformed"):
        lane_from_document({"calls": [], "server": [{"after": 0}]}, "x.trace.yaml")
