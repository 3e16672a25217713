"""Matching replayed requests to recorded turns, and the record side of a session."""

from __future__ import annotations

import json
from typing import Any

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.cassette.index import TurnIndex
from flowproof_cli.dialects import Rendered
from flowproof_cli.dialects.openai_chat import OpenAIChat

PATH = "/v1/chat/completions"
CHAT = OpenAIChat()


def request(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}], **extra}


def reply(text: str, *calls: tuple[str, str, str]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text if not calls else None}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ]
    return {
        "id": f"chatcmpl-{text}",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
    }


def turn(body: dict[str, Any], response: dict[str, Any], status: int = 200) -> Turn:
    return Turn("openai-chat", body, status, response)


def send(session: CassetteSession, body: dict[str, Any], path: str = PATH) -> Rendered:
    outcome = session.on_request(path, json.dumps(body).encode())
    assert isinstance(outcome, Rendered)
    return outcome


def error_message(rendered: Rendered) -> str:
    assert rendered.content_type == "application/json"
    return json.loads(rendered.body)["error"]["message"]


# --- TurnIndex ----------------------------------------------------------------------------


def test_identical_turns_are_claimed_in_order_each_once() -> None:
    body = request("hi")
    index = TurnIndex(
        [turn(body, reply("a")), turn(request("other"), reply("b")), turn(body, reply("c"))]
    )
    assert index.claim("openai-chat", body) == 0
    assert index.used == {0}
    assert index.unconsumed() == [1, 2]
    assert index.claim("openai-chat", body) == 2
    assert index.claim("openai-chat", body) is None
    assert index.unconsumed() == [1]
    assert index.claim("openai-chat", request("other")) == 1
    assert index.claim("openai-chat", request("other")) is None
    assert index.used == {0, 1, 2}
    assert index.unconsumed() == []


def test_key_order_of_the_request_is_irrelevant() -> None:
    recorded = {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "x"}]}
    reordered = {"messages": [{"content": "x", "role": "user"}], "temperature": 0, "model": "m"}
    index = TurnIndex([turn(recorded, reply("a"))])
    assert index.claim("openai-chat", reordered) == 0


def test_a_different_value_or_protocol_does_not_match() -> None:
    index = TurnIndex([turn(request("hi"), reply("a"))])
    assert index.claim("openai-chat", request("hi", temperature=0)) is None
    assert index.claim("other-protocol", request("hi")) is None
    assert index.claim("openai-chat", request("hi")) == 0


def test_used_is_a_copy() -> None:
    index = TurnIndex([turn(request("hi"), reply("a"))])
    index.used.add(0)
    assert index.used == set()


# --- CassetteSession: replay ---------------------------------------------------------------


def test_replay_serves_recorded_turns_and_tracks_positions() -> None:
    session = CassetteSession(
        Mode.REPLAY,
        recorded=[turn(request("one"), reply("first")), turn(request("two"), reply("second"))],
    )
    first = send(session, request("one"))
    second = send(session, request("two", stream=False))
    assert first.status == 200
    assert json.loads(first.body) == reply("first")
    assert json.loads(second.body) == reply("second")
    assert session.served == [0, 1]
    assert session.requests == 2
    assert session.routes == {PATH: 2}
    assert session.divergence is None


def test_replay_extra_call_is_a_divergence() -> None:
    session = CassetteSession(Mode.REPLAY, recorded=[turn(request("one"), reply("first"))])
    assert send(session, request("one")).status == 200
    extra = send(session, request("one"))
    assert extra.status == 409
    expected = (
        "extra call: the agent made a model call beyond the 1 recorded "
        "(every recorded turn was already used)"
    )
    assert error_message(extra) == f"flowproof: {expected}"
    assert json.loads(extra.body)["error"]["type"] == "flowproof_divergence"
    assert session.divergence is not None
    assert session.divergence.turn == 0
    assert session.divergence.summary == expected


def test_the_first_divergence_is_told_once() -> None:
    """The driver's cue to give the agent its grace, then stop it (runner/drivers.py)."""
    told: list[str] = []
    session = CassetteSession(Mode.REPLAY, recorded=[turn(request("one"), reply("first"))])
    session.on_divergence = lambda: told.append(session.divergence.summary)  # type: ignore[union-attr]
    assert send(session, request("one")).status == 200
    assert told == []
    assert send(session, request("two")).status == 409
    assert send(session, request("one")).status == 409  # refused: told no more
    assert len(told) == 1 and told[0].startswith("extra call: ")


def test_first_divergence_halts_later_requests() -> None:
    session = CassetteSession(
        Mode.REPLAY,
        recorded=[turn(request("one"), reply("first")), turn(request("two"), reply("second"))],
    )
    diverged = send(session, request("one", temperature=0.5))
    assert diverged.status == 409
    assert session.divergence is not None
    summary = session.divergence.summary
    assert summary.startswith("turn 1: request parameters changed: ")
    assert error_message(diverged).startswith(f"flowproof: {summary}")

    # A request that would have matched is refused too, naming the first divergence.
    halted = send(session, request("two"))
    assert halted.status == 409
    assert error_message(halted) == f"flowproof: replay stopped after a divergence: {summary}"
    assert session.served == []


def test_mocks_are_applied_before_matching() -> None:
    conversation = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
    ]
    mock = {"temp": 21, "sky": "clear"}
    recorded_body = {
        "model": "gpt-4o-mini",
        "messages": [
            *conversation,
            {"role": "tool", "tool_call_id": "call_1", "content": '{"sky":"clear","temp":21}'},
        ],
    }
    live_body = {
        "model": "gpt-4o-mini",
        "messages": [
            *conversation,
            {"role": "tool", "tool_call_id": "call_1", "content": "whatever the tool returned"},
        ],
        "stream": False,
    }
    session = CassetteSession(
        Mode.REPLAY, mocks={"get_weather": mock}, recorded=[turn(recorded_body, reply("done"))]
    )
    served = send(session, live_body)
    assert served.status == 200
    assert json.loads(served.body) == reply("done")

    # Without the mock the same request diverges.
    unmocked = CassetteSession(Mode.REPLAY, recorded=[turn(recorded_body, reply("done"))])
    assert send(unmocked, live_body).status == 409


def test_concurrent_requests_in_reverse_order_are_both_served() -> None:
    session = CassetteSession(
        Mode.REPLAY,
        recorded=[
            turn(request("title please"), reply("A title")),
            turn(request("main task"), reply("Main answer")),
        ],
    )
    late = send(session, request("main task"))
    early = send(session, request("title please"))
    assert json.loads(late.body) == reply("Main answer")
    assert json.loads(early.body) == reply("A title")
    assert session.served == [1, 0]
    assert session.used_turns() == [0, 1]
    assert session.divergence is None

    trajectory = session.trajectory()
    assert [(t.turn, t.text) for t in trajectory.turns] == [(1, "A title"), (2, "Main answer")]


def test_trajectory_skips_error_turns_and_keeps_tool_calls() -> None:
    session = CassetteSession(
        Mode.REPLAY,
        recorded=[
            turn(request("a"), reply("x", ("c1", "get_weather", '{"city":"Nairobi"}'))),
            turn(request("b"), {"error": {"message": "overloaded"}}, status=529),
            turn(request("c"), reply("done")),
        ],
    )
    for prompt in ("c", "b", "a"):
        send(session, request(prompt))
    trajectory = session.trajectory()
    assert [t.turn for t in trajectory.turns] == [1, 3]
    assert [(c.name, c.arguments, c.turn) for c in trajectory.tool_calls] == [
        ("get_weather", {"city": "Nairobi"}, 1)
    ]
    assert trajectory.reply == "done"


def test_non_json_body_is_a_400() -> None:
    session = CassetteSession(Mode.REPLAY, recorded=[turn(request("a"), reply("x"))])
    outcome = session.on_request(PATH, b"not json")
    assert isinstance(outcome, Rendered)
    assert outcome.status == 400
    message = "flowproof: the request to /v1/chat/completions is not a JSON object"
    assert error_message(outcome) == message
    assert session.errors == [message]
    assert session.divergence is None


def test_unrouted_path_is_a_404() -> None:
    session = CassetteSession(Mode.REPLAY)
    outcome = session.on_request("/v1/audio/speech", b"{}")
    assert isinstance(outcome, Rendered)
    assert outcome.status == 404
    assert error_message(outcome) == (
        "flowproof: /v1/audio/speech is not a model endpoint flowproof records"
    )
    assert session.requests == 0


# --- CassetteSession: record ---------------------------------------------------------------

TOOL_CALL = {
    "id": "call_9",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Nairobi"}'},
}


def streamed_request_with_tool_result() -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
            {"role": "tool", "tool_call_id": "call_9", "content": "live result"},
        ],
    }


def record_session() -> CassetteSession:
    return CassetteSession(
        Mode.RECORD,
        mocks={"get_weather": {"temp": 21}},
        upstream=Upstream("https://models.example/v1/", key="sk-test"),
    )


def test_record_forwards_a_non_streaming_mocked_body() -> None:
    session = record_session()
    forward = session.on_request(
        PATH + "?api-version=1", json.dumps(streamed_request_with_tool_result()).encode()
    )
    assert isinstance(forward, Forward)
    assert forward.url == "https://models.example/v1/chat/completions?api-version=1"
    assert forward.headers == {"authorization": "Bearer sk-test"}
    sent = json.loads(forward.body)
    assert "stream" not in sent
    assert "stream_options" not in sent
    assert sent["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_9",
        "content": '{"temp":21}',
    }
    assert sent["messages"][:2] == streamed_request_with_tool_result()["messages"][:2]
    assert session.recorded == []


def test_record_stores_the_canonical_request_and_renders_like_replay() -> None:
    session = record_session()
    body = streamed_request_with_tool_result()
    forward = session.on_request(PATH, json.dumps(body).encode())
    assert isinstance(forward, Forward)
    upstream_answer = reply("It is 21 degrees and clear in Nairobi today, enjoy the sunshine.")
    upstream_answer["usage"] = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    rendered = session.on_upstream_response(
        forward.pending, 200, json.dumps(upstream_answer).encode()
    )

    assert len(session.recorded) == 1
    stored = session.recorded[0]
    assert stored == Turn(
        "openai-chat",
        {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
                {"role": "tool", "tool_call_id": "call_9", "content": '{"temp":21}'},
            ],
        },
        200,
        upstream_answer,
    )
    assert rendered.content_type == "text/event-stream"
    assert rendered.body.endswith(b"data: [DONE]\n\n")
    assert b'"usage"' in rendered.body

    replay = CassetteSession(
        Mode.REPLAY, mocks={"get_weather": {"temp": 21}}, recorded=list(session.recorded)
    )
    replayed = send(replay, body)
    assert replayed == rendered
    assert replay.trajectory() == session.trajectory()


def test_record_keeps_a_non_json_upstream_answer_as_text() -> None:
    session = record_session()
    forward = session.on_request(PATH, json.dumps(request("x")).encode())
    assert isinstance(forward, Forward)
    rendered = session.on_upstream_response(forward.pending, 502, b"Bad Gateway")
    assert rendered == Rendered(502, "text/plain; charset=utf-8", b"Bad Gateway")
    assert session.recorded[0].response == "Bad Gateway"
    assert session.trajectory().turns == []


def test_record_without_upstream_is_a_502() -> None:
    session = CassetteSession(Mode.RECORD)
    outcome = session.on_request(PATH, json.dumps(request("x")).encode())
    assert isinstance(outcome, Rendered)
    assert outcome.status == 502
    assert error_message(outcome) == "flowproof: record has no upstream configured"
    assert session.errors == ["flowproof: record has no upstream configured"]


def test_record_upstream_error_is_a_502_and_recorded_as_error() -> None:
    session = record_session()
    forward = session.on_request(PATH, json.dumps(request("x")).encode())
    assert isinstance(forward, Forward)
    rendered = session.on_upstream_error(forward.pending, "connection refused")
    message = "flowproof: could not reach the upstream model: connection refused"
    assert rendered.status == 502
    assert error_message(rendered) == message
    assert session.errors == [message]
    assert session.recorded == []


def test_mocks_reach_a_result_whose_call_came_in_an_earlier_served_response() -> None:
    # Responses API chain: the second request answers call_1 by `previous_response_id`, so
    # only the session's memory of the first served response names the tool as mocked.
    first = {"model": "m", "input": "weather?"}
    called = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}
        ],
    }
    answer = {"id": "resp_2", "object": "response", "status": "completed", "output": []}

    def second(output: str) -> dict[str, Any]:
        result = {"type": "function_call_output", "call_id": "call_1", "output": output}
        return {"model": "m", "previous_response_id": "resp_1", "input": [result]}

    def session() -> CassetteSession:
        return CassetteSession(
            Mode.REPLAY,
            mocks={"get_weather": {"temp": 21}},
            recorded=[
                Turn("openai-responses", first, 200, called),
                Turn("openai-responses", second('{"temp":21}'), 200, answer),
            ],
        )

    chained = session()
    assert send(chained, first, "/v1/responses").status == 200
    assert json.loads(send(chained, second("live tool output"), "/v1/responses").body) == answer

    # Without the first response served, call_1 is unknown: the result is left alone.
    unchained = session()
    assert send(unchained, second("live tool output"), "/v1/responses").status == 409
