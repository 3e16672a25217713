"""A session in a conversation (cassette/conversation.py): record tags each call with the
turn open, replay serves a call only from the open turn's recorded calls, and every
divergence names the turn, its message and the call within it."""

from __future__ import annotations

import json
from typing import Any

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.trace import loads
from flowproof_cli.trace.conversation import RecordedConversation
from flowproof_cli.trace.envelope import Trace
from flowproof_cli.trace.storage import dumps

from .test_cassette_matching import PATH, error_message, reply, request, send


def tagged(prompt: str, answer: str, number: int) -> Turn:
    return Turn("openai-chat", request(prompt), 200, reply(answer), conversation_turn=number)


def conversation(*messages: str) -> OpenTurn:
    return OpenTurn(id="c1", messages=dict(enumerate(messages, start=1)))


def _replay(turns: list[Turn], *messages: str) -> CassetteSession:
    return CassetteSession(Mode.REPLAY, recorded=turns, conversation=conversation(*messages))


def test_replay_serves_each_call_only_while_its_turn_is_open() -> None:
    session = _replay([tagged("hi", "a", 1), tagged("cancel", "b", 2)], "hi", "cancel")
    session.conversation.open(1, "hi")  # type: ignore[union-attr]
    assert send(session, request("hi")).status == 200
    session.conversation.open(2, "cancel")  # type: ignore[union-attr]
    assert json.loads(send(session, request("cancel")).body) == reply("b")
    assert session.divergence is None and session.served == [0, 1]


def test_a_call_recorded_in_another_turn_is_a_divergence_naming_both_turns() -> None:
    session = _replay([tagged("hi", "a", 1), tagged("cancel", "b", 2)], "hi", "Then cancel it.")
    session.conversation.open(1, "hi")  # type: ignore[union-attr]
    refused = send(session, request("cancel"))
    assert refused.status == 409
    summary = session.divergence.summary  # type: ignore[union-attr]
    assert summary.startswith('conversation turn 1 ("hi"), model call 1: this call was recorded')
    assert 'in conversation turn 2 ("Then cancel it."), not in this one' in summary
    assert session.divergence.conversation_turn == 1  # type: ignore[union-attr]
    assert session.divergence.to_json()["conversation_turn"] == 1  # type: ignore[union-attr]
    assert error_message(refused).startswith("flowproof: conversation turn 1")


def test_a_changed_message_names_the_turn_and_the_call_within_it() -> None:
    session = _replay([tagged("hi", "a", 1), tagged("cancel", "b", 2)], "hi", "cancel")
    session.conversation.open(1, "hi")  # type: ignore[union-attr]
    send(session, request("hi"))
    session.conversation.open(2, "Then cancel it, please.")  # type: ignore[union-attr]
    send(session, request("Then cancel it, please."))
    summary = session.divergence.summary  # type: ignore[union-attr]
    assert summary.startswith(
        'conversation turn 2 ("Then cancel it, please."), model call 1: message 0 (user) '
        "content changed"
    ), summary


def test_an_extra_call_in_a_turn_says_how_many_the_turn_recorded() -> None:
    session = _replay([tagged("hi", "a", 1), tagged("bye", "b", 2)], "hi", "bye")
    session.conversation.open(1, "hi")  # type: ignore[union-attr]
    send(session, request("hi"))
    send(session, request("hi"))
    summary = session.divergence.summary  # type: ignore[union-attr]
    assert summary == (
        'conversation turn 1 ("hi"), model call 2: extra call: the agent made a model call '
        "beyond the 1 recorded in this turn"
    )


def test_record_tags_each_call_with_the_turn_open_when_it_was_asked() -> None:
    session = CassetteSession(
        Mode.RECORD, upstream=Upstream("http://127.0.0.1:9"), conversation=OpenTurn(id="c")
    )
    session.conversation.open(2, "second")  # type: ignore[union-attr]
    forward = session.on_request(PATH, json.dumps(request("x")).encode())
    assert isinstance(forward, Forward)
    session.on_upstream_response(forward.pending, 200, json.dumps(reply("y")).encode())
    assert [turn.conversation_turn for turn in session.recorded] == [2]


def test_the_trace_keeps_the_conversation_and_each_turns_number() -> None:
    trace = Trace(
        flow="f",
        turns=[tagged("hi", "a", 1), tagged("bye", "b", 2)],
        conversation=RecordedConversation("c1", ("hi", "bye"), (False, True)),
    )
    text = dumps(trace)
    assert (
        "conversation:\n  id: c1\n  turns:\n  - user: hi\n  - user: bye\n    simulated: true\n"
        in text
    )
    assert "conversation_turn: 2" in text
    again = loads(text)
    assert again.conversation == trace.conversation
    assert [turn.conversation_turn for turn in again.turns] == [1, 2]


def test_a_one_turn_trace_is_byte_identical_to_before() -> None:
    text = dumps(Trace(flow="f", turns=[Turn("openai-chat", request("hi"), 200, reply("a"))]))
    assert "conversation" not in text


def test_a_malformed_turn_number_names_the_turn(tmp_path: Any) -> None:
    text = dumps(Trace(flow="f", turns=[tagged("hi", "a", 1)])).replace(
        "conversation_turn: 1", "conversation_turn: one"
    )
    try:
        loads(text, "x.trace.yaml")
    except Exception as exc:
        assert "turn 1 is malformed: its `conversation_turn` is 'one'" in str(exc)
    else:
        raise AssertionError("a malformed conversation_turn loaded")
