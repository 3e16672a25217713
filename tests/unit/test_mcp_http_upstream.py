"""The real server's side of an HTTP MCP record, driven without a proxy: what each answer
to a forwarded request means (kept in the lane, or the record fails naming it), and the
session's entry points for what the proxy could not read or handle."""

from __future__ import annotations

import json

import pytest

from flowproof_cli.mcp.call_bound import CallBound
from flowproof_cli.mcp.http import ForwardRequest, Reply
from flowproof_cli.mcp.http_record import HttpRecordSession
from flowproof_cli.mcp.http_upstream import SseAnswer

URL = "http://real/mcp"
INIT = {"protocolVersion": "2025-03-26"}
SSE = "text/event-stream"


def rpc(request_id: object, method: str, params: object = None) -> bytes:
    message: dict[str, object] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def waiting(
    method: str = "initialize", params: object = INIT
) -> tuple[HttpRecordSession, ForwardRequest]:
    """A record session with call 1 forwarded and waiting for its answer."""
    session = HttpRecordSession("probe", url=URL, bound=CallBound(5, from_spec=True))
    forward = session.on_request("POST", {}, rpc(1, method, params))
    assert forward == ForwardRequest(URL, via=1)
    assert isinstance(forward, ForwardRequest)
    return session, forward


def streamed(session: HttpRecordSession, forward: ForwardRequest, *chunks: bytes) -> SseAnswer:
    answer = session.on_response_headers(forward, 200, "text/event-stream; charset=utf-8")
    assert answer is not None
    for chunk in chunks:
        answer.on_chunk(chunk)
    return answer


# -- a whole answer ------------------------------------------------------------------------


def test_a_json_rpc_answer_is_kept_and_handed_on() -> None:
    session, forward = waiting()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": INIT}).encode()
    assert session.on_response_headers(forward, 200, "application/json") is None
    assert session.on_response(forward, "POST", 200, "application/json", body) is None
    assert session.errors == []
    assert session.lane().calls[0].result == INIT


def test_a_garbage_body_fails_the_record_naming_the_call_its_status_and_media() -> None:
    session, forward = waiting()
    body = b"\x00\xff<html>upstream exploded\n"
    assert session.on_response(forward, "POST", 200, "text/html; charset=latin-1", body) is None
    assert session.errors == [
        "the MCP server 'probe' answered call 1 (initialize) with a body that is not JSON-RPC "
        "(HTTP 200, text/html): \\x00\ufffd<html>upstream exploded"
    ]


@pytest.mark.parametrize(
    ("content_type", "media"), [(None, "no content type"), ("", ""), ("application/json", None)]
)
def test_an_empty_answer_to_a_call_says_so(content_type: str | None, media: str | None) -> None:
    session, forward = waiting()
    assert session.on_response(forward, "POST", 200, content_type, b"") is None
    shown = "application/json" if media is None else media
    assert session.errors == [
        "the MCP server 'probe' answered call 1 (initialize) with a body that is not JSON-RPC "
        f"(HTTP 200, {shown}): (empty)"
    ]


def test_an_http_error_without_json_rpc_is_kept_as_that_error() -> None:
    session, forward = waiting()
    text = b'{"error": "Incorrect API key provided"}'
    assert session.on_response(forward, "POST", 500, "application/json", text) is None
    assert session.errors == []
    call = session.lane().calls[0]
    assert (call.status, call.error) == (
        500,
        {"code": -32603, "message": 'HTTP 500: {"error": "Incorrect API key provided"}'},
    )


@pytest.mark.parametrize(("method", "status"), [("POST", 202), ("GET", 200), ("DELETE", 200)])
def test_an_acknowledgement_or_a_get_or_delete_answer_is_not_read(method: str, status: int) -> None:
    session, forward = waiting()
    assert session.on_response(forward, method, status, "text/html", b"garbage") is None
    assert session.errors == []


def test_an_answer_too_deep_to_read_is_replaced_by_a_named_500() -> None:
    session, forward = waiting()
    deep = b"[" * 100_000 + b"]" * 100_000
    reply = session.on_response(forward, "POST", 200, "application/json", deep)
    assert isinstance(reply, Reply) and reply.status == 500
    error = json.loads(reply.body)
    assert (error["id"], error["error"]["code"]) == (1, -32603)
    text = error["error"]["message"].removeprefix("flowproof: ")
    assert text.startswith("could not handle the real server's answer (RecursionError: ")
    assert session.errors == [f"the MCP server 'probe': {text}"]


# -- an SSE answer, as it streams through ----------------------------------------------------


def test_an_sse_answer_split_mid_event_is_kept_and_its_wait_is_the_calls_bound() -> None:
    session, forward = waiting()
    event = b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"x"}}\n\n'
    answer = streamed(session, forward, event[:17], event[17:], b"")
    assert answer.idle_s == 5
    assert session.errors == []
    assert session.lane().calls[0].result == {"protocolVersion": "x"}


def test_a_stream_meant_to_stay_open_has_no_idle_wait() -> None:
    session = HttpRecordSession("probe", url=URL)
    standalone = session.on_request("GET", {}, b"")
    assert isinstance(standalone, ForwardRequest) and standalone.standalone
    assert streamed(session, standalone).idle_s is None
    listen, listening = waiting("subscriptions/listen", {})
    assert streamed(listen, listening).idle_s is None


def test_a_cut_sse_answer_fails_the_record_naming_the_event() -> None:
    """The server closed its stream mid-event: the half event still counts, and is not
    JSON-RPC."""
    session, forward = waiting()
    streamed(session, forward, b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk"', b"")
    assert session.errors == [
        "the MCP server 'probe' sent an SSE event that is not JSON-RPC in its answer to "
        'call 1 (initialize): {"id":"chatcmpl-1","object":"chat.completion.chunk"'
    ]
    assert not session.lane().calls[0].answered


def test_an_event_that_is_not_json_rpc_fails_the_record_and_the_next_is_still_kept() -> None:
    session, forward = waiting()
    streamed(
        session,
        forward,
        b'data: {"hello": 1}\n\n',
        b": a comment\n\nevent: ping\ndata: x\n\n",  # neither is a message: not read
        b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n\n',
        b"",
    )
    assert session.errors == [
        "the MCP server 'probe' sent an SSE event that is not JSON-RPC in its answer to "
        'call 1 (initialize): {"hello": 1}'
    ]
    assert session.lane().calls[0].result == {}


def test_an_event_that_cannot_be_read_fails_the_record_and_never_raises() -> None:
    session, forward = waiting()
    streamed(session, forward, b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n")
    (error,) = session.errors
    assert error.startswith(
        "the MCP server 'probe': could not handle the real server's stream (RecursionError: "
    )


def test_an_event_resent_to_a_resuming_agent_is_kept_once() -> None:
    session = HttpRecordSession("probe", url=URL)
    standalone = session.on_request("GET", {}, b"")
    assert isinstance(standalone, ForwardRequest)
    event = b'id: e1\ndata: {"jsonrpc":"2.0","method":"n"}\n\n'
    streamed(session, standalone, event, event, b"")
    assert len(session.lane().server) == 1 and session.lane().server[0].stream


# -- a forward that ended without its answer ---------------------------------------------------


def test_a_server_that_cut_the_connection_is_named_with_the_reason() -> None:
    session, forward = waiting()
    session.on_upstream_error(forward, "peer closed", agent_gone=False, answered=False)
    assert session.errors == [
        f"flowproof could not reach the real MCP server 'probe' at {URL}: peer closed"
    ]


def test_the_agent_leaving_a_call_names_the_call() -> None:
    session, forward = waiting()
    session.on_upstream_error(forward, "Client disconnected.", agent_gone=True, answered=False)
    assert session.errors == [
        "the MCP server 'probe' had not answered initialize (JSON-RPC id 1) when the agent "
        "stopped waiting (the call's bound: 5 s)"
    ]


def test_the_agent_leaving_a_stream_it_had_is_no_failure() -> None:
    session, forward = waiting()
    session.on_upstream_error(forward, "Client disconnected.", agent_gone=True, answered=True)
    assert session.errors == []


def test_the_agent_leaving_before_an_answer_to_no_call() -> None:
    session = HttpRecordSession("probe", url=URL)
    forward = session.on_request("DELETE", {}, b"")
    assert isinstance(forward, ForwardRequest)
    session.on_upstream_error(forward, "Client disconnected.", agent_gone=True, answered=False)
    assert session.errors == [
        f"flowproof could not reach the real MCP server 'probe' at {URL}: the agent closed its "
        "connection before the server answered"
    ]


def test_a_call_past_its_bound_is_named_with_the_bound() -> None:
    session, forward = waiting()
    session.on_upstream_timeout(forward.via)
    assert session.errors == [
        "the MCP server 'probe' did not answer initialize (JSON-RPC id 1) within 5 s "
        "(its `call_timeout`)"
    ]


# -- what the proxy could not read or handle ---------------------------------------------------


def test_a_request_the_proxy_would_not_read_is_counted_refused_and_fails_the_flow() -> None:
    session = HttpRecordSession("probe", url=URL)
    text = "the request to /mcp says Content-Encoding: gzip, but its body is not gzip data"
    reply = session.on_refused(text, 500)
    assert session.requests == 1 and session.contacted
    assert (reply.status, json.loads(reply.body)["error"]) == (
        500,
        {"code": -32600, "message": f"flowproof: {text}"},
    )
    assert session.errors == [f"the MCP server 'probe': {text}"]


def test_a_request_whose_handling_raised_is_a_named_500() -> None:
    session = HttpRecordSession("probe", url=URL)
    reply = session.on_exception("/mcp", KeyError("params"))
    text = (
        "could not handle the request to /mcp (KeyError: 'params'); it was refused, not forwarded"
    )
    assert (reply.status, json.loads(reply.body)["error"]) == (
        500,
        {"code": -32603, "message": f"flowproof: {text}"},
    )
    assert session.errors == [f"the MCP server 'probe': {text}"]
    session.fail("POST /x reached no flowproof boundary")
    assert session.errors[-1] == "the MCP server 'probe': POST /x reached no flowproof boundary"
