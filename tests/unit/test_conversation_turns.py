"""A conversation judged turn by turn (runner/turn_judge.py): each `user:` step's assertions
against the calls of the turns it opened, `strict` per turn, the whole conversation's steps
before the first `user:`, unserved recorded calls and a url turn's status named by turn."""

from __future__ import annotations

import textwrap
from pathlib import Path

from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.runner.turn_judge import judge_turns, unserved_turns
from flowproof_cli.runner.turn_outcome import TurnOutcome
from flowproof_cli.spec import FlowSpec, load_spec

from .test_cassette_matching import reply, request, send

#: A conversation flow's lines before its steps (a stdin bot whose `> ` prompt ends a turn),
#: named by `{name}`; HEAD is the `support` one.
HEAD_OF = """\
name: {name}
app: agent
agent:
  command: python bot.py
  conversation:
    until: '^> $'
"""
HEAD = HEAD_OF.format(name="support")


def spec_of(tmp_path: Path, steps: str, head: str = HEAD) -> FlowSpec:
    path = tmp_path / "support.flow.yaml"
    path.write_text(head + "steps:\n" + textwrap.dedent(steps), encoding="utf-8")
    return load_spec(path)


def played(*turns: tuple[str, dict[str, object]]) -> tuple[CassetteSession, list[TurnOutcome]]:
    """A replay that served one call per turn: (message, the model's answer)."""
    recorded = [
        Turn("openai-chat", request(message), 200, answer, conversation_turn=number)
        for number, (message, answer) in enumerate(turns, start=1)
    ]
    session = CassetteSession(Mode.REPLAY, recorded=recorded, conversation=OpenTurn(id="c"))
    outcomes = []
    for number, (message, _) in enumerate(turns, start=1):
        session.conversation.open(number, message)  # type: ignore[union-attr]
        send(session, request(message))
        outcomes.append(TurnOutcome(number, message, number, ended=True))
    return session, outcomes


ORDER = ("call_1", "lookup_order", '{"order_id": 4711}')
CANCEL = ("call_2", "cancel_order", '{"order_id": 4711}')


def test_each_turns_steps_judge_that_turn_alone(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        """\
        - user: where is 4711
        - assert_tool_call: lookup_order where order_id equals 4711
        - user: cancel it
        - assert_tool_call: cancel_order
        - assert_no_tool_call: lookup_order
        """,
    )
    session, turns = played(("where is 4711", reply("", ORDER)), ("cancel it", reply("", CANCEL)))
    assert judge_turns(spec, session, turns, {}) == []


def test_a_failed_step_names_its_turn_its_line_and_carries_the_turn(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        """\
        - user: where is 4711
        - assert: reply contains shipped
        - user: Then cancel it, please.
        - assert: reply contains cancelled
        """,
    )
    session, turns = played(
        ("where is 4711", reply("it shipped")), ("Then cancel it, please.", reply("shipped"))
    )
    [failure] = judge_turns(spec, session, turns, {})
    assert failure.message.startswith(
        'conversation turn 2 ("Then cancel it, please."): assert reply contains cancelled: '
    )
    assert (failure.line, failure.turn) == (11, 2)


def test_a_tool_called_in_another_turn_does_not_satisfy_this_one(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        """\
        - user: where is 4711
        - user: cancel it
        - assert_tool_call: lookup_order
        """,
    )
    session, turns = played(("where is 4711", reply("", ORDER)), ("cancel it", reply("done")))
    [failure] = judge_turns(spec, session, turns, {})
    assert failure.turn == 2 and "assert_tool_call lookup_order" in failure.message


def test_steps_before_the_first_user_judge_the_whole_conversation(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        """\
        - assert_tool_call: cancel_order
        - assert_tool_call: issue_refund
        - user: where is 4711
        - user: cancel it
        """,
    )
    session, turns = played(("where is 4711", reply("", ORDER)), ("cancel it", reply("", CANCEL)))
    [failure] = judge_turns(spec, session, turns, {})
    assert failure.turn is None and failure.message.startswith("assert_tool_call issue_refund")


def test_strict_holds_turn_by_turn(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        """\
        - user: where is 4711
        - assert_tool_call: lookup_order
        - user: cancel it
        """,
        head=HEAD + "strict: true\n",
    )
    session, turns = played(("where is 4711", reply("", ORDER)), ("cancel it", reply("", CANCEL)))
    [failure] = judge_turns(spec, session, turns, {})
    assert failure.turn == 2 and "cancel_order" in failure.message


def test_a_url_turn_that_answered_an_error_is_named_with_its_status(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, "- user: hi\n- assert: reply contains hello\n")
    session, turns = played(("hi", reply("nope")))
    turns[0].status, turns[0].output = 500, ["boom"]
    [failure] = judge_turns(spec, session, turns, {})
    assert failure.message.endswith("(the service answered turn 1's POST with HTTP 500: boom)")


def test_a_recorded_call_never_asked_for_names_its_turn() -> None:
    recorded = [
        Turn("openai-chat", request("a"), 200, reply("x"), conversation_turn=1),
        Turn("openai-chat", request("b"), 200, reply("y"), conversation_turn=2),
        Turn("openai-chat", request("c"), 200, reply("z"), conversation_turn=2),
    ]
    session = CassetteSession(Mode.REPLAY, recorded=recorded, conversation=OpenTurn(id="c"))
    session.conversation.open(1, "a")  # type: ignore[union-attr]
    send(session, request("a"))
    session.conversation.open(2, "then b")  # type: ignore[union-attr]
    send(session, request("b"))
    turns = [TurnOutcome(1, "a", 1, ended=True), TurnOutcome(2, "then b", 2, ended=True)]
    [failure] = unserved_turns(session, turns)
    assert failure.message == (
        'conversation turn 2 ("then b"): the agent made 1 model call(s) in this turn, the '
        "recording has 2 (recorded turn(s) never requested: 3)"
    )
    assert failure.turn == 2
