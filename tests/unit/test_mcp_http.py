"""The streamable-HTTP MCP boundary: session logic, SSE, and the addon on a real proxy."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from flowproof_cli.mcp.http import (
    ForwardRequest,
    Reply,
    StreamReply,
)
from flowproof_cli.mcp.http_record import HttpRecordSession
from flowproof_cli.mcp.http_replay import REPLAY_SESSION_ID, HttpReplaySession
from flowproof_cli.mcp.lane import Call, Lane, ServerEvent, lane_to_document
from flowproof_cli.mcp.sse import SseParser, frame
from tests.unit.proxy_clients import ACCEPT_BOTH, mcp_boundary, mcp_client


def rpc(request_id, method, params=None) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def answer(request_id, result) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def lane() -> Lane:
    """initialize; a slow call with progress; a call whose server asks for roots; then a
    list_changed on the standalone stream."""
    return Lane(
        calls=[
            Call(
                "initialize",
                {"protocolVersion": "2025-03-26"},
                {"protocolVersion": "2025-03-26"},
                answered=True,
            ),
            Call("tools/call", {"name": "slow", "arguments": {}}, {"content": []}, answered=True),
            Call("tools/call", {"name": "roots", "arguments": {}}, {"content": []}, answered=True),
        ],
        server=[
            ServerEvent(after=1, during=2, notification={"method": "notifications/progress"}),
            ServerEvent(
                after=2,
                during=3,
                request={"method": "roots/list"},
                answer={"result": {"roots": []}},
            ),
            ServerEvent(
                after=3, stream=True, notification={"method": "notifications/tools/list_changed"}
            ),
        ],
    )


def test_sse_parser_handles_crlf_split_chunks_and_ids() -> None:
    parser = SseParser()
    stream = b'id: 7\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\n: comment\n\ndata: x'
    events = []
    for position in range(0, len(stream), 3):
        events += parser.feed(stream[position : position + 3])
    events += parser.close()
    assert [(e.id, e.event, e.data) for e in events] == [
        ("7", "message", '{"a":\n1}'),
        (None, "message", "x"),
    ]
    assert SseParser().feed(frame({"x": "é"}, "1")) == SseParser().feed(frame({"x": "é"}, "1"))
    (event,) = SseParser().feed(frame({"x": "é"}))
    assert json.loads(event.data) == {"x": "é"}


def test_replay_answers_json_sse_and_streams() -> None:
    session = HttpReplaySession("notes", lane=lane())
    init = session.on_request(
        "POST", ACCEPT_BOTH, rpc(1, "initialize", {"protocolVersion": "2025-03-26"})
    )
    assert isinstance(init, Reply) and init.headers["mcp-session-id"] == REPLAY_SESSION_ID
    assert json.loads(init.body)["id"] == 1 and init.headers["content-type"] == "application/json"
    slow = session.on_request(
        "POST", ACCEPT_BOTH, rpc(2, "tools/call", {"name": "slow", "arguments": {}})
    )
    assert isinstance(slow, Reply) and slow.headers["content-type"] == "text/event-stream"
    events = SseParser().feed(slow.body)
    assert [json.loads(e.data).get("method", "answer") for e in events] == [
        "notifications/progress",
        "answer",
    ]
    json_only = HttpReplaySession("notes", lane=lane())
    json_only.on_request("POST", {}, rpc(1, "initialize", {"protocolVersion": "2025-03-26"}))
    plain = json_only.on_request(
        "POST",
        {"accept": "application/json"},
        rpc(2, "tools/call", {"name": "slow", "arguments": {}}),
    )
    assert isinstance(plain, Reply) and json.loads(plain.body)["id"] == 2
    # The roots/list request must wait for the agent's answer: the POST is streamed.
    roots = session.on_request(
        "POST", ACCEPT_BOTH, rpc(3, "tools/call", {"name": "roots", "arguments": {}})
    )
    assert isinstance(roots, StreamReply)
    stream = session.on_request("GET", ACCEPT_BOTH, b"")
    assert isinstance(stream, StreamReply)
    second = session.on_request("GET", ACCEPT_BOTH, b"")
    assert isinstance(second, Reply) and second.status == 409
    assert session.on_request("POST", {}, answer(2, {"roots": []})).status == 202  # type: ignore[union-attr]
    assert session.replayer.failures() == []
    assert session.on_request("DELETE", {}, b"").status == 200  # type: ignore[union-attr]


def test_replay_refusals_are_named() -> None:
    session = HttpReplaySession("notes", lane=lane())
    batch = session.on_request("POST", {}, b"[" + rpc(1, "initialize") + b"]")
    assert isinstance(batch, Reply) and batch.status == 400
    assert "only allowed in protocol 2025-03-26" in json.loads(batch.body)["error"]["message"]
    headers = {"mcp-method": "tools/list"}
    mismatch = session.on_request("POST", headers, rpc(1, "tools/call", {"name": "x"}))
    assert isinstance(mismatch, Reply) and mismatch.status == 400
    assert "Mcp-Method header says tools/list" in json.loads(mismatch.body)["error"]["message"]
    assert session.on_request("POST", {}, b"{not json").status == 400  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("sent", "answer_id"),
    [
        ({"jsonrpc": "2.0", "id": 7, "method": 5}, 7),
        ({"jsonrpc": "2.0", "id": "x", "params": {}}, "x"),
        ({"jsonrpc": "2.0", "id": True, "method": None}, None),
        (5, None),
    ],
)
@pytest.mark.parametrize("mode", ["replay", "record"])
def test_a_body_that_is_not_json_rpc_is_refused_to_the_call_waiting_for_it(
    mode: str, sent: object, answer_id: object
) -> None:
    """Its error carries the message's id when one can be told, as over stdio: the agent's
    pending call gets its answer instead of waiting for the flow's timeout."""
    session = (
        HttpReplaySession("notes", lane=lane())
        if mode == "replay"
        else HttpRecordSession("notes", url="http://real/mcp")
    )
    reply = session.on_request("POST", {}, json.dumps(sent).encode())
    assert isinstance(reply, Reply) and reply.status == 400
    assert json.loads(reply.body) == {
        "jsonrpc": "2.0",
        "id": answer_id,
        "error": {"code": -32600, "message": "flowproof: the body is not a JSON-RPC message"},
    }
    assert session.errors == ["the MCP server 'notes': the body is not a JSON-RPC message"]


def test_a_batch_in_2025_03_26_is_handled_element_wise() -> None:
    session = HttpReplaySession("notes", lane=lane())
    session.on_request("POST", {}, rpc(1, "initialize", {"protocolVersion": "2025-03-26"}))
    batch = b"[" + rpc(7, "tools/call", {"name": "slow", "arguments": {}}) + b"]"
    reply = session.on_request("POST", {}, batch)
    assert isinstance(reply, Reply) and [m["id"] for m in json.loads(reply.body)] == [7]


def test_record_forwards_mocks_answer_and_null_ids_are_attributed() -> None:
    session = HttpRecordSession("notes", url="http://real/mcp", mocks={"rm": "ok"})
    forward = session.on_request("POST", {}, rpc(1, "server/discover"))
    assert forward == ForwardRequest("http://real/mcp", via=1)
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "no"}}
    session.on_upstream_message(error, via=1, status=400)
    mocked = session.on_request("POST", {}, rpc(2, "tools/call", {"name": "rm", "arguments": {}}))
    assert (
        isinstance(mocked, Reply)
        and json.loads(mocked.body)["result"]["content"][0]["text"] == "ok"
    )
    assert session.on_request("GET", {}, b"") == ForwardRequest("http://real/mcp", standalone=True)
    session.on_upstream_message({"jsonrpc": "2.0", "method": "n"}, standalone=True, event_id="e1")
    session.on_upstream_message({"jsonrpc": "2.0", "method": "n"}, standalone=True, event_id="e1")
    recorded = session.lane()
    assert recorded.calls[0].error == {"code": -32000, "message": "no"}
    assert recorded.calls[0].status == 400
    assert recorded.calls[1].mocked
    assert len(recorded.server) == 1 and recorded.server[0].stream  # a resumed event once


@pytest.mark.timeout(60)
def test_the_addon_streams_over_time_with_zero_network() -> None:
    """A GET stream and a POST awaiting a server-initiated request, through mitmproxy."""

    async def scenario() -> None:
        session = HttpReplaySession("notes", lane=lane())
        async with mcp_client(session, "/api/mcp", "2025-03-26") as (client, url, init):
            assert init.headers["mcp-session-id"] == REPLAY_SESSION_ID
            async with client.stream("GET", url) as standalone:
                assert standalone.status_code == 200
                second = await client.get(url)
                assert second.status_code == 409
                await client.post(
                    url, content=rpc(2, "tools/call", {"name": "slow", "arguments": {}})
                )
                async with client.stream(
                    "POST",
                    url,
                    content=rpc(3, "tools/call", {"name": "roots", "arguments": {}}),
                ) as waiting:
                    lines = waiting.aiter_lines()
                    request = await _next_message(lines)
                    assert request["method"] == "roots/list"
                    ack = await client.post(url, content=answer(request["id"], {"roots": []}))
                    assert ack.status_code == 202
                    final = await _next_message(lines)
                    assert final["id"] == 3
                pushed = await _next_message(standalone.aiter_lines())
                assert pushed["method"] == "notifications/tools/list_changed"
            refused = await client.get(url.replace("/api/mcp", "/elsewhere"))
            assert refused.status_code == 404
        assert session.replayer.failures() == []

    asyncio.run(scenario())


async def _next_message(lines) -> dict:
    async for text in lines:
        if text.startswith("data:"):
            return json.loads(text.removeprefix("data:").strip())
    raise AssertionError("the stream ended")


@pytest.mark.timeout(60)
def test_record_passes_auth_and_session_through_and_stores_neither() -> None:
    seen: list[dict[str, str]] = []

    class Upstream(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            reply = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"ok": 1}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("mcp-session-id", "real-session-42")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    real = f"http://127.0.0.1:{server.server_address[1]}/mcp"

    async def scenario() -> HttpRecordSession:
        session = HttpRecordSession("notes", url=real)
        async with mcp_boundary(session) as port:
            headers = {**ACCEPT_BOTH, "authorization": "Bearer s3cret", "mcp-session-id": "abc"}
            async with httpx.AsyncClient(timeout=20, headers=headers) as client:
                reply = await client.post(
                    f"http://127.0.0.1:{port}/mcp", content=rpc(7, "tools/list")
                )
            assert reply.json() == {"jsonrpc": "2.0", "id": 7, "result": {"ok": 1}}
            assert reply.headers["mcp-session-id"] == "real-session-42"
        return session

    try:
        session = asyncio.run(scenario())
    finally:
        server.shutdown()
    assert seen[0]["authorization"] == "Bearer s3cret" and seen[0]["mcp-session-id"] == "abc"
    stored = json.dumps(lane_to_document(session.lane()))
    assert "s3cret" not in stored and "abc" not in stored and "real-session-42" not in stored
    assert session.lane().calls[0].result == {"ok": 1}


def test_record_refuses_a_mocked_tool_inside_a_batch() -> None:
    """docs/mcp.md: "a mocked tool inside a batch is refused at record"."""
    session = HttpRecordSession("notes", url="http://real/mcp", mocks={"rm": "ok"})
    session.on_request("POST", {}, rpc(1, "initialize", {"protocolVersion": "2025-03-26"}))
    session.on_upstream_message(
        json.loads(answer(1, {"protocolVersion": "2025-03-26"})), via=1, status=200
    )
    mixed = b"[" + rpc(2, "tools/list") + b"," + rpc(3, "tools/call", {"name": "rm"}) + b"]"
    refused = session.on_request("POST", {}, mixed)
    assert isinstance(refused, Reply) and refused.status == 400
    text = "a mocked tool cannot be called inside a JSON-RPC batch"
    assert text in json.loads(refused.body)["error"]["message"]
    assert session.errors == [f"the MCP server 'notes': {text}"]
    assert [call.method for call in session.lane().calls] == ["initialize"]  # nothing kept
    plain = b"[" + rpc(4, "tools/list") + b"]"
    assert session.on_request("POST", {}, plain) == ForwardRequest("http://real/mcp")
