"""Recording a lane from raw traffic and replaying it: the state machine, transport-blind."""

from __future__ import annotations

from flowproof_cli.mcp.lane import Lane
from flowproof_cli.mcp.recorder import LaneRecorder
from flowproof_cli.mcp.replayer import UNPOSITIONED, Replayer


def req(request_id, method, params=None):
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def res(request_id, result):
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def note(method, params=None):
    return {"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})}


INIT = req(1, "initialize", {"protocolVersion": "2025-11-25", "clientInfo": {"name": "a"}})
INIT_OK = res(1, {"protocolVersion": "2025-11-25", "capabilities": {}})


def call_tool(request_id, tool, token=None, **arguments):
    params = {"name": tool, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return req(request_id, "tools/call", params)


def text(value):
    return {"content": [{"type": "text", "text": value}], "isError": False}


def recorded_session() -> Lane:
    """initialize; a slow tool with progress; a tool whose server asks for sampling."""
    recorder = LaneRecorder()
    recorder.client(INIT)
    recorder.server(INIT_OK)
    recorder.client(note("notifications/initialized"))
    recorder.client(call_tool(2, "slow", token=2, n=2))
    recorder.server(note("notifications/progress", {"progressToken": 2, "progress": 1}))
    recorder.server(note("notifications/progress", {"progressToken": 2, "progress": 2}))
    recorder.server(res(2, text("counted")))
    recorder.client(call_tool(3, "summarize", name="a"))
    recorder.server(req(0, "sampling/createMessage", {"messages": [], "maxTokens": 5}))
    recorder.client(res(0, {"role": "assistant", "content": {"type": "text", "text": "hi"}}))
    recorder.server(res(3, text("summary: hi")))
    recorder.server(note("notifications/tools/list_changed"))
    return recorder.lane


def test_the_recorded_lane_has_anchors_and_answers() -> None:
    lane = recorded_session()
    assert [c.method for c in lane.calls] == ["initialize", "tools/call", "tools/call"]
    assert lane.calls[0].params == {"protocolVersion": "2025-11-25"}
    progress, _, sampling, changed = lane.server
    assert (progress.after, progress.during, progress.stream) == (1, 2, False)
    assert sampling.request == {
        "method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 5},
    }
    assert sampling.answer == {
        "result": {"role": "assistant", "content": {"type": "text", "text": "hi"}}
    }
    assert (changed.after, changed.during) == (3, None)


def test_replay_answers_with_the_agents_ids_and_tokens() -> None:
    replayer = Replayer("notes", recorded_session())
    out = replayer.receive({**INIT, "id": "a"})
    assert [e.message for e in out] == [{"jsonrpc": "2.0", "id": "a", **INIT_OK | {"id": "a"}}]
    assert replayer.receive(note("notifications/initialized")) == []
    out = replayer.receive(call_tool(17, "slow", token="tok", n=2))
    assert [e.message.get("method") for e in out] == [
        "notifications/progress",
        "notifications/progress",
        None,
    ]
    assert out[0].message["params"]["progressToken"] == "tok"
    assert out[-1].message["id"] == 17 and out[-1].final and out[-1].channel == 1
    # The sampling request goes out; the answer to the call waits for the agent's answer.
    out = replayer.receive(call_tool(18, "summarize", name="a"))
    assert len(out) == 1 and out[0].message["method"] == "sampling/createMessage"
    assert not out[0].final and out[0].channel == 2
    sent_id = out[0].message["id"]
    out = replayer.receive(
        res(sent_id, {"role": "assistant", "content": {"type": "text", "text": "hi"}})
    )
    assert [e.message.get("id") for e in out] == [18, None]
    assert out[1].message["method"] == "notifications/tools/list_changed"
    assert out[1].channel is None  # after the call was answered: the standalone stream
    assert replayer.failures() == []


def test_a_changed_answer_to_a_sampling_request_diverges() -> None:
    replayer = Replayer("notes", recorded_session())
    replayer.receive(INIT)
    replayer.receive(call_tool(2, "slow", n=2))
    (sampling,) = replayer.receive(call_tool(3, "summarize", name="a"))
    out = replayer.receive(
        res(
            sampling.message["id"], {"role": "assistant", "content": {"type": "text", "text": "yo"}}
        )
    )
    assert replayer.divergence == (
        "the MCP server 'notes' diverged at its request 1 (sampling/createMessage): "
        "result.content.text: recorded hi, replayed yo"
    )
    assert [e.message["id"] for e in out] == [3]  # the pending call is refused, not left hanging
    assert out[0].message["error"]["message"].startswith("flowproof: replay stopped")
    assert replayer.failures() == [replayer.divergence]


def test_divergent_argument_extra_and_missing_calls() -> None:
    replayer = Replayer("files", recorded_session())
    replayer.receive(INIT)
    (refusal,) = replayer.receive(call_tool(2, "slow", n=3))
    assert replayer.divergence == (
        "the MCP server 'files' diverged at call 2: arguments.n: recorded 2, replayed 3"
    )
    assert refusal.message["error"]["message"] == f"flowproof: {replayer.divergence}"

    extra = Replayer("files", recorded_session())
    for message in (INIT, call_tool(2, "slow", n=2), call_tool(3, "summarize", name="a")):
        extra.receive(message)
    extra.receive(res(1, {"role": "assistant", "content": {"type": "text", "text": "hi"}}))
    extra.receive(req(9, "tools/list"))
    assert extra.divergence == (
        "the MCP server 'files' diverged at call 4: an extra call (tools/list); the recording "
        "has 3 call(s)"
    )

    short = Replayer("files", recorded_session())
    short.receive(INIT)
    assert short.failures() == [
        "the MCP server 'files' ran short: the agent made 1 of the 3 recorded call(s) "
        "(never made: call 2 (tools/call slow), 3 (tools/call summarize))"
    ]
    never = Replayer("files", recorded_session())
    assert "never contacted" in never.failures("FLOWPROOF_MCP_SERVER_FILES")[0]


def test_an_unanswered_server_request_fails_at_the_end() -> None:
    replayer = Replayer("notes", recorded_session())
    for message in (INIT, call_tool(2, "slow", n=2), call_tool(3, "summarize", name="a")):
        replayer.receive(message)
    assert replayer.failures() == [
        "the MCP server 'notes' diverged at its request 1 (sampling/createMessage): the agent "
        "never answered it"
    ]


def test_mocks_pings_and_late_answers() -> None:
    recorder = LaneRecorder()
    recorder.client(req(1, "tools/call", {"name": "danger", "arguments": {}}), mocked=True)
    recorder.server(res(1, text("{}")))
    recorder.client(req(2, "ping"))
    recorder.server(res(2, {}))
    recorder.client(req(3, "subscriptions/listen", {"notifications": {}}))
    recorder.client(req(4, "tools/call", {"name": "a", "arguments": {}}))
    recorder.server(note("notifications/resources/updated", {"uri": "x"}), via=3)
    recorder.server(res(4, text("a")))
    recorder.server(res(3, {"_meta": {"io.modelcontextprotocol/subscriptionId": 3}}))
    lane = recorder.lane
    assert [c.method for c in lane.calls] == ["tools/call", "subscriptions/listen", "tools/call"]
    assert lane.calls[0].mocked and lane.calls[1].settled_after == 2

    replayer = Replayer("s", lane, mocks={"danger": {"ok": True}})
    (answer,) = replayer.receive(req("m", "tools/call", {"name": "danger", "arguments": {}}))
    assert answer.message["result"]["structuredContent"] == {"ok": True}  # the spec's mock now
    (pong,) = replayer.receive(req("p", "ping"))
    assert pong.channel == UNPOSITIONED and pong.message == {
        "jsonrpc": "2.0",
        "id": "p",
        "result": {},
    }
    # The update crossed while the listen stream was open and one call was answered.
    (update,) = replayer.receive(req("listen-1", "subscriptions/listen", {"notifications": {}}))
    assert (update.channel, update.final) == (1, False)
    out = replayer.receive(req(9, "tools/call", {"name": "a", "arguments": {}}))
    assert [(e.channel, e.final) for e in out] == [(2, True), (1, True)]  # listen ends after
    assert out[1].message["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"
    assert replayer.failures() == []
