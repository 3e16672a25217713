"""The Responses API over WebSocket below the proxy: frames as requests, answers as frames,
the trace's `transport`, continuations in the trajectory, and the record-side frame flow
(addons/websocket.py `Frames`) driven without mitmproxy's network."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from mitmproxy.test import tflow

from flowproof_addons import websocket as sockets
from flowproof_cli import trace as traces
from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.cassette.session import recorded_over, upgrade_target
from flowproof_cli.cassette.turn import match_key
from flowproof_cli.dialects import Rendered, route
from flowproof_cli.dialects.openai_responses import OpenAIResponses
from flowproof_cli.dialects.websocket import (
    Unreadable,
    accept_key,
    error_frame,
    failure_of,
    frame_of_request,
    frames_of,
    request_of_frame,
)
from flowproof_cli.errors import TraceError
from flowproof_cli.trace import envelope
from flowproof_cli.trajectory import AssistantTurn, Trajectory

DIALECT = OpenAIResponses()
BODY = {"model": "gpt-5.5", "input": [{"role": "user", "content": "hi"}], "store": False}
ANSWER = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "output": [
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello there", "annotations": []}],
        }
    ],
}


def test_the_accept_key_is_rfc_6455s() -> None:
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_a_create_frame_is_its_request_body_asking_for_the_stream() -> None:
    frame = frame_of_request(BODY)
    assert json.loads(frame)["type"] == "response.create"
    assert request_of_frame(frame) == {**BODY, "stream": True}


def test_a_frame_and_the_same_http_request_match_the_same_turn() -> None:
    """Transport-blind: `stream` is a transport field, so the frame's canonical request is
    the HTTP body's, and either one claims a turn recorded over the other."""
    body = request_of_frame(frame_of_request(BODY))
    assert isinstance(body, dict)
    http = {**BODY, "stream": False}
    frame_key = match_key(DIALECT.name, DIALECT.canonical_request(body))
    assert frame_key == match_key(DIALECT.name, DIALECT.canonical_request(http))


def test_a_warm_up_matches_only_a_warm_up() -> None:
    warm = request_of_frame(frame_of_request({**BODY, "generate": False}))
    assert isinstance(warm, dict)
    assert DIALECT.canonical_request(warm)["generate"] is False
    assert match_key(DIALECT.name, DIALECT.canonical_request(warm)) != match_key(
        DIALECT.name, DIALECT.canonical_request(BODY)
    )


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"not json", "it is not JSON"),
        (b"[1]", "it is not a JSON object"),
        (
            b'{"type": "response.cancel"}',
            "its `type` is \"response.cancel\", not 'response.create'",
        ),
        (b"{}", "its `type` is missing, not 'response.create'"),
    ],
)
def test_any_other_frame_is_unreadable_naming_why(content: bytes, reason: str) -> None:
    assert request_of_frame(content) == Unreadable(reason)


def test_an_answer_becomes_its_stream_events_one_frame_each() -> None:
    rendered = DIALECT.render({**BODY, "stream": True}, 200, ANSWER, stream=True)
    frames = [json.loads(frame) for frame in frames_of(rendered)]
    assert frames[0]["type"] == "response.created"
    assert frames[-1] == {"type": "response.completed", "sequence_number": len(frames) - 1,
                          "response": ANSWER}  # fmt: skip


def test_an_error_answer_becomes_one_error_event_with_its_status() -> None:
    body = json.dumps({"error": {"message": "flowproof: diverged", "type": "x"}}).encode()
    [frame] = frames_of(Rendered(409, "application/json", body))
    assert json.loads(frame) == {
        "type": "error",
        "status": 409,
        "error": {"message": "flowproof: diverged", "type": "x"},
    }
    assert json.loads(error_frame(500, b"plain"))["error"]["message"] == "plain"


def test_failing_events_stand_for_an_error_status() -> None:
    status, body = failure_of({"type": "error", "status": 429, "error": {"message": "slow"}})
    assert (status, json.loads(body)) == (429, {"error": {"message": "slow"}})
    failed = {"type": "response.failed", "response": {"error": {"message": "boom"}}}
    assert failure_of(failed) == (500, json.dumps({"error": {"message": "boom"}}).encode())


# -- the trace ----------------------------------------------------------------------------------


def _trace(*turns: Turn) -> traces.Trace:
    return traces.Trace(flow="f", turns=list(turns))


def test_a_socket_turn_says_its_transport_and_an_http_turn_says_none() -> None:
    socket = Turn(DIALECT.name, BODY, 200, ANSWER, None, "websocket")
    http = Turn(DIALECT.name, BODY, 200, ANSWER)
    document = envelope.to_document(_trace(socket, http))
    assert [turn.get("transport") for turn in document["turns"]] == ["websocket", None]
    assert "transport" not in document["turns"][1]  # older traces stay byte-identical
    again = envelope.from_document(document, "x.trace.yaml")
    assert [turn.transport for turn in again.turns] == ["websocket", None]


def test_an_unknown_transport_is_a_malformed_turn() -> None:
    document = envelope.to_document(_trace(Turn(DIALECT.name, BODY, 200, ANSWER)))
    document["turns"][0]["transport"] = "carrier-pigeon"
    with pytest.raises(TraceError, match=r"turn 1 is malformed: its `transport` is 'carrier"):
        envelope.from_document(document, "x.trace.yaml")


def test_replay_accepts_the_socket_only_for_a_trace_recorded_over_it() -> None:
    socket = Turn(DIALECT.name, BODY, 200, ANSWER, None, "websocket")
    assert recorded_over(CassetteSession(Mode.REPLAY, recorded=[socket]), "websocket")
    http = Turn(DIALECT.name, BODY, 200, ANSWER)
    assert not recorded_over(CassetteSession(Mode.REPLAY, recorded=[http]), "websocket")


# -- continuations --------------------------------------------------------------------------------


def test_a_continuation_joins_the_thread_of_the_response_it_names() -> None:
    """A warm-up carries the system prompt; its continuations only the new items. They are
    one conversation, so the reply is the last continuation's, not the warm-up's."""
    warm = AssistantTurn(1, None, (), thread_key="system", response_id="resp_1")
    call = AssistantTurn(2, None, (), thread_key="", response_id="resp_2", continues="resp_1")
    side = AssistantTurn(3, "A title", (), thread_key="title prompt", response_id="resp_3")
    last = AssistantTurn(4, "pelican", (), thread_key="", response_id="resp_4", continues="resp_2")
    trajectory = Trajectory([warm, call, side, last])
    assert [turn.turn for turn in trajectory.main_thread] == [1, 2, 4]
    assert trajectory.reply == "pelican"


def test_the_responses_dialect_names_the_response_and_what_it_continues() -> None:
    turn = DIALECT.assistant_turn({**BODY, "previous_response_id": "resp_0"}, ANSWER, 1)
    assert (turn.response_id, turn.continues) == ("resp_1", "resp_0")


# -- record: the frames of one socket -------------------------------------------------------------

KEY = "sk-proj-frames0key0000000000000000"


class _Message:
    def __init__(self, content: bytes, from_client: bool) -> None:
        self.content, self.from_client, self.injected, self.dropped = (
            content,
            from_client,
            False,
            False,
        )

    def drop(self) -> None:
        self.dropped = True


def _flow(*messages: _Message) -> Any:
    websocket = SimpleNamespace(messages=list(messages), closed_by_client=False)
    request = SimpleNamespace(path="/v1/responses", headers={"user-agent": "ws-agent/1.0"})
    return SimpleNamespace(
        id="flow-1", websocket=websocket, request=request, metadata={sockets.PATH: "/v1/responses"}
    )


def _recording() -> tuple[CassetteSession, sockets.Frames, list[bytes]]:
    sent: list[bytes] = []
    inject = lambda flow, to_client, frame, is_text: sent.append(frame)  # noqa: E731
    frames = sockets.Frames(SimpleNamespace(inject_websocket=inject, connections={}))
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9/v1", KEY))
    return session, frames, sent


def test_record_holds_the_upstreams_events_and_sends_the_turns_own() -> None:
    session, frames, sent = _recording()
    client = _Message(frame_of_request({**BODY, "stream": True}), from_client=True)
    flow = _flow(client)
    asyncio.run(frames.from_client(flow, session, DIALECT))
    assert not client.dropped and json.loads(client.content)["stream"] is True  # passed on
    for event in ({"type": "response.created", "response": {**ANSWER, "output": []}},
                  {"type": "response.completed", "response": {**ANSWER, "echo": KEY}}):  # fmt: skip
        upstream = _Message(json.dumps(event).encode(), from_client=False)
        flow.websocket.messages.append(upstream)
        frames.from_upstream(flow, session)
        assert upstream.dropped  # held back: the client gets the turn's own events
    [turn] = session.recorded
    assert turn.transport == "websocket" and not session.errors
    assert json.loads(sent[-1])["type"] == "response.completed"
    assert KEY not in b"".join(sent).decode()


def test_an_error_event_fails_the_record_and_reaches_the_agent_as_sent() -> None:
    session, frames, sent = _recording()
    flow = _flow(_Message(frame_of_request(BODY), from_client=True))
    asyncio.run(frames.from_client(flow, session, DIALECT))
    error = {"type": "error", "status": 429, "error": {"message": "slow down"}}
    flow.websocket.messages.append(_Message(json.dumps(error).encode(), from_client=False))
    frames.from_upstream(flow, session)
    assert sent == [json.dumps(error).encode()]
    assert session.errors == [
        "flowproof: the upstream model answered turn 1 with HTTP 429: slow down"
    ]


def test_an_error_event_with_no_request_pending_fails_the_record() -> None:
    session, frames, _ = _recording()
    error = {"type": "error", "status": 400, "error": {"message": "no"}}
    message = _Message(json.dumps(error).encode(), from_client=False)
    frames.from_upstream(_flow(message), session)
    assert not message.dropped  # passed on as sent
    assert session.errors[0].startswith(
        "flowproof: the upstream model sent an error event on the WebSocket with no request "
        "pending (HTTP 400)"
    )


def test_a_socket_closed_before_the_answer_fails_the_record() -> None:
    session, frames, _ = _recording()
    flow = _flow(_Message(frame_of_request(BODY), from_client=True))
    asyncio.run(frames.from_client(flow, session, DIALECT))
    assert isinstance(flow.metadata[sockets.WAITING], deque)
    sockets.Frames.ended(flow, session)
    assert session.errors == [
        "flowproof: could not reach the upstream model: the upstream closed the WebSocket "
        "before the response completed"
    ]


def test_a_forward_is_what_an_http_request_gets() -> None:
    """The frame path reuses the session's own forwarding: the same body, key and URL."""
    session, _, _ = _recording()
    outcome = session.on_request("/v1/responses", json.dumps(BODY).encode(), DIALECT)
    assert isinstance(outcome, Forward)
    assert outcome.headers == {"authorization": f"Bearer {KEY}"}
    assert upgrade_target(session, "/v1/responses", DIALECT) == (
        "http://127.0.0.1:9/v1/responses",
        {"authorization": f"Bearer {KEY}"},
    )


# -- the upgrade ------------------------------------------------------------------------------------


def _upgrade(path: str = "/v1/responses", version: str = "13") -> Any:
    flow = tflow.tflow()
    flow.request.method, flow.request.path = "GET", path
    flow.request.headers.update(
        {
            "upgrade": "websocket",
            "connection": "Upgrade",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
            "sec-websocket-version": version,
            "authorization": "Bearer sk-placeholder",
        }
    )
    return flow


def _replaying(*turns: Turn) -> CassetteSession:
    return CassetteSession(Mode.REPLAY, recorded=list(turns))


SOCKET_TURN = Turn(DIALECT.name, BODY, 200, ANSWER, None, "websocket")


@pytest.mark.parametrize(
    ("path", "version", "turns", "why"),
    [
        (
            "/v1/chat/completions",
            "13",
            [SOCKET_TURN],
            "flowproof serves the openai-chat API over HTTP only",
        ),
        ("/v1/responses", "8", [SOCKET_TURN], "it asked for WebSocket version '8'"),
        ("/v1/responses", "13", [], "the trace was recorded over HTTP"),
    ],
)
def test_an_upgrade_flowproof_cannot_serve_is_answered_426_and_noted(
    path: str, version: str, turns: list[Turn], why: str
) -> None:
    flow, session = _upgrade(path, version), _replaying(*turns)
    dialect = route(path)
    assert dialect is not None
    sockets.on_upgrade(flow, session, dialect)
    assert flow.response.status_code == 426
    assert flow.response.headers["sec-websocket-version"] == "13"
    message = json.loads(flow.response.content)["error"]["message"]
    [note] = session.notes
    assert note.startswith(
        f"the agent's WebSocket upgrade of {path} was answered 426, so it used HTTP: "
    )
    assert why in note and note in message
    assert not session.errors  # a 426 is not a failure: the client asks again over HTTP


def test_replay_sends_a_trace_recorded_over_the_socket_to_the_loopback_peer() -> None:
    flow, session = _upgrade(), _replaying(SOCKET_TURN)
    sockets.on_upgrade(flow, session, DIALECT)
    assert flow.response is None and flow.metadata[sockets.SINK]
    sink = sockets.Sink()

    async def opened() -> int:
        await sockets.to_sink(flow, sink)
        port = sink.port
        sink.close()
        return port

    port = asyncio.run(opened())
    assert flow.request.url == f"http://127.0.0.1:{port}/"
    assert "authorization" not in flow.request.headers  # the placeholder goes nowhere


def test_record_sends_the_upgrade_to_the_upstream_with_the_key() -> None:
    flow = _upgrade()
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9/v1", KEY))
    sockets.on_upgrade(flow, session, DIALECT)
    assert flow.response is None
    assert flow.request.url == "http://127.0.0.1:9/v1/responses"
    assert flow.request.headers["authorization"] == f"Bearer {KEY}"
    assert flow.metadata[sockets.UPGRADING]


def test_record_without_an_upstream_refuses_the_upgrade() -> None:
    flow = _upgrade()
    session = CassetteSession(Mode.RECORD)
    sockets.on_upgrade(flow, session, DIALECT)
    assert flow.response.status_code == 502
    assert session.errors == ["flowproof: record has no upstream configured"]
