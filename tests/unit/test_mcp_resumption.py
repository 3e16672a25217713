"""Resumption ids at replay (handshake era): SSE event ids and `Last-Event-ID`, no network."""

from __future__ import annotations

import json

import pytest

from flowproof_cli.mcp.http import Reply, StreamReply
from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.lane import Call, Lane, ServerEvent
from flowproof_cli.mcp.sse import Channel, SseParser

ACCEPT_BOTH = {"accept": "application/json, text/event-stream"}
DISCOVER_META = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}


def rpc(request_id: int, method: str, params: dict | None = None) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def tool(request_id: int, name: str) -> bytes:
    return rpc(request_id, "tools/call", {"name": name, "arguments": {}})


def note(method: str, after: int, during: int | None = None, stream: bool = False) -> ServerEvent:
    return ServerEvent(after=after, notification={"method": method}, during=during, stream=stream)


def lane(version: str = "2025-11-25", first: str = "initialize") -> Lane:
    """Call 1 opens the session; call 2 streams progress; call 3 asks the agent for roots;
    calls 4 and 5 each let two notifications out on the standalone stream."""
    params = {"protocolVersion": version} if first == "initialize" else DISCOVER_META
    return Lane(
        calls=[
            Call(first, params, {"protocolVersion": version}, answered=True),
            Call("tools/call", {"name": "slow", "arguments": {}}, {"content": []}, answered=True),
            Call("tools/call", {"name": "roots", "arguments": {}}, {"content": []}, answered=True),
            Call("tools/call", {"name": "a", "arguments": {}}, {"content": []}, answered=True),
            Call("tools/call", {"name": "b", "arguments": {}}, {"content": []}, answered=True),
        ],
        server=[
            note("notifications/progress", after=1, during=2),
            note("notifications/message", after=1, during=2),
            ServerEvent(after=2, during=3, request={"method": "roots/list"}, answer={"result": {}}),
            note("notifications/one", after=4, stream=True),
            note("notifications/two", after=4, stream=True),
            note("notifications/three", after=5, stream=True),
            note("notifications/four", after=5, stream=True),
        ],
    )


def drain(channel: Channel) -> list[tuple[str | None, str]]:
    """(id, method or "answer") of every event queued on a channel so far."""
    out: list[tuple[str | None, str]] = []
    parser = SseParser()
    while not channel._queue.empty():
        data = channel._queue.get_nowait()
        if data is None:
            out.append((None, "(end)"))
            continue
        for event in parser.feed(data):
            out.append((event.id, json.loads(event.data).get("method", "answer")))
    return out


def events(body: bytes) -> list[tuple[str | None, str]]:
    return [
        (event.id, json.loads(event.data).get("method", "answer"))
        for event in SseParser().feed(body)
    ]


def opened(version: str = "2025-11-25") -> HttpReplaySession:
    session = HttpReplaySession("notes", lane=lane(version))
    session.on_request("POST", ACCEPT_BOTH, rpc(1, "initialize", {"protocolVersion": version}))
    return session


def get(session: HttpReplaySession, last: str | None = None) -> Reply | StreamReply:
    headers = {**ACCEPT_BOTH, **({"Last-Event-ID": last} if last is not None else {})}
    reply = session.on_request("GET", headers, b"")
    assert isinstance(reply, Reply | StreamReply)
    return reply


def test_post_sse_answers_carry_ids_named_after_the_call() -> None:
    session = opened()
    slow = session.on_request("POST", ACCEPT_BOTH, tool(2, "slow"))
    assert isinstance(slow, Reply)
    assert events(slow.body) == [
        ("call2-1", "notifications/progress"),
        ("call2-2", "notifications/message"),
        ("call2-3", "answer"),
    ]
    # A resume of that stream re-sends only what came after the id, and ends with it.
    resumed = get(session, "call2-1")
    assert isinstance(resumed, Reply) and resumed.status == 200
    assert events(resumed.body) == [("call2-2", "notifications/message"), ("call2-3", "answer")]


def slow_then_roots(session: HttpReplaySession) -> tuple[StreamReply, StreamReply]:
    """The slow tool called, the standalone GET stream opened, then the roots tool called:
    the GET stream and the roots call's stream."""
    session.on_request("POST", ACCEPT_BOTH, tool(2, "slow"))
    standalone = get(session)
    assert isinstance(standalone, StreamReply)
    roots = session.on_request("POST", ACCEPT_BOTH, tool(3, "roots"))
    assert isinstance(roots, StreamReply)
    return standalone, roots


def answer_roots(session: HttpReplaySession) -> None:
    """The agent's answer to the server's roots/list request (id 3)."""
    session.on_request("POST", {}, json.dumps({"jsonrpc": "2.0", "id": 3, "result": {}}).encode())


def run_standalone(drop_after: int | None) -> list[tuple[str | None, str]]:
    """The GET stream's events as the agent receives them, dropping it after N events."""
    session = opened()
    stream, _ = slow_then_roots(session)
    answer_roots(session)
    session.on_request("POST", ACCEPT_BOTH, tool(4, "a"))
    received = drain(stream.channel)
    if drop_after is not None:
        received = received[:drop_after]
        stream.channel.closed = True  # what the stream server does when the agent hangs up
    session.on_request("POST", ACCEPT_BOTH, tool(5, "b"))
    if drop_after is None:
        return received + drain(stream.channel)
    assert received[-1][0] is not None
    resumed = get(session, received[-1][0])
    assert isinstance(resumed, StreamReply)
    assert isinstance(get(session), Reply)  # the resumed stream is the open one (409)
    return received + drain(resumed.channel)


def test_the_standalone_stream_resumes_with_exactly_the_missing_events() -> None:
    whole = run_standalone(None)
    assert whole == [
        ("get-1", "notifications/one"),
        ("get-2", "notifications/two"),
        ("get-3", "notifications/three"),
        ("get-4", "notifications/four"),
    ]
    assert run_standalone(1) == whole
    assert run_standalone(2) == whole
    assert run_standalone(None) == whole  # a second replay: the same ids


def test_a_plain_get_after_a_drop_gets_only_what_was_never_handed_out() -> None:
    session = opened()
    session.on_request("POST", ACCEPT_BOTH, tool(2, "slow"))
    session.on_request("POST", ACCEPT_BOTH, tool(3, "roots"))
    answer_roots(session)
    session.on_request("POST", ACCEPT_BOTH, tool(4, "a"))
    first = get(session)  # the backlog: events 1 and 2
    assert isinstance(first, StreamReply)
    assert [i for i, _ in drain(first.channel)] == ["get-1", "get-2"]
    first.channel.closed = True
    session.on_request("POST", ACCEPT_BOTH, tool(5, "b"))
    fresh = get(session)
    assert isinstance(fresh, StreamReply)
    assert [i for i, _ in drain(fresh.channel)] == ["get-3", "get-4"]


def test_a_left_call_stream_keeps_its_answer_for_the_resume() -> None:
    session = opened()
    standalone, roots = slow_then_roots(session)
    assert drain(roots.channel) == [("call3-1", "roots/list")]
    roots.channel.closed = True  # the agent lost the POST's stream
    answer_roots(session)
    assert drain(standalone.channel) == []  # the answer is not pushed anywhere else
    resumed = get(session, "call3-1")
    assert isinstance(resumed, Reply)
    assert events(resumed.body) == [("call3-2", "answer")]
    assert json.loads(SseParser().feed(resumed.body)[0].data)["id"] == 3
    session.on_request("POST", ACCEPT_BOTH, tool(4, "a"))
    session.on_request("POST", ACCEPT_BOTH, tool(5, "b"))
    assert session.replayer.failures() == []


def test_a_resume_while_flowproof_still_holds_the_old_connection_supersedes_it() -> None:
    session = opened()
    session.on_request("POST", ACCEPT_BOTH, tool(2, "slow"))
    roots = session.on_request("POST", ACCEPT_BOTH, tool(3, "roots"))
    assert isinstance(roots, StreamReply)
    drain(roots.channel)
    resumed = get(session, "call3-1")
    assert isinstance(resumed, StreamReply) and roots.channel.closed
    assert drain(resumed.channel) == []
    answer_roots(session)
    assert drain(resumed.channel) == [("call3-2", "answer"), (None, "(end)")]


@pytest.mark.parametrize("last", ["nope", "get-0", "get-9", "get-01", "call2-9", "call9-1", "-1"])
def test_an_id_flowproof_never_sent_is_a_named_400(last: str) -> None:
    session = opened()
    session.on_request("POST", ACCEPT_BOTH, tool(2, "slow"))
    session.on_request("POST", ACCEPT_BOTH, tool(3, "roots"))
    answer_roots(session)
    session.on_request("POST", ACCEPT_BOTH, tool(4, "a"))
    reply = get(session, last)
    assert isinstance(reply, Reply) and reply.status == 400
    message = json.loads(reply.body)["error"]["message"]
    assert f"Last-Event-ID {last!r} names no event this replay sent" in message


def test_the_2026_era_sends_no_ids_and_ignores_last_event_id() -> None:
    session = HttpReplaySession("notes", lane=lane("2026-07-28", "server/discover"))
    session.on_request("POST", ACCEPT_BOTH, rpc(1, "server/discover", DISCOVER_META))
    slow = session.on_request("POST", ACCEPT_BOTH, tool(2, "slow"))
    assert isinstance(slow, Reply)
    assert [i for i, _ in events(slow.body)] == [None, None, None]
    assert b"id:" not in slow.body
    stream = get(session, "call2-1")  # not a resume: the plain standalone stream
    assert isinstance(stream, StreamReply)
    roots = session.on_request("POST", ACCEPT_BOTH, tool(3, "roots"))
    assert isinstance(roots, StreamReply)
    assert drain(roots.channel) == [(None, "roots/list")]
    roots.channel.closed = True
    answer_roots(session)
    assert drain(stream.channel) == []  # as before: nobody is told the left call's answer
