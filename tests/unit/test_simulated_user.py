"""The simulated user (runner/simulated_user.py): the user side walks the spec's `user:`
steps, a simulated one asks the model until DONE or `max_turns`, its calls are the trace's
user lane, and replay answers it from that lane or says in words what it was told
differently, and in which turn."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.cassette import CassetteSession, Mode, Turn, Upstream
from flowproof_cli.cassette.conversation import OpenTurn, UserCall
from flowproof_cli.dialects import CHAT, DIALECTS, dialect_named
from flowproof_cli.dialects.base import PlainRequestRefused, text_of
from flowproof_cli.errors import SpecError, TraceError
from flowproof_cli.runner.conversation import (
    TurnOutcome,
    UserMessage,
    converse_service,
    user_side,
)
from flowproof_cli.runner.simulated_user import (
    DONE,
    NOTHING_PRINTED,
    OPENING,
    system_prompt,
    told_differently,
)
from flowproof_cli.runner.url_driver import TriggerOutcome
from flowproof_cli.spec import FlowSpec, SimulatedUser, load_spec
from flowproof_cli.trace import loads
from flowproof_cli.trace.conversation import RecordedConversation
from flowproof_cli.trace.envelope import Trace
from flowproof_cli.trace.storage import dumps
from tests.fakes.fake_upstream import FakeUpstream, Reply
from tests.unit.test_conversation_turns import HEAD_OF

PLAIN = ("openai-chat", "openai-responses", "anthropic", "gemini")

FLOW = (
    HEAD_OF.replace("{name}", "simulated")
    + """\
steps:
  - user: My order 4711 has not arrived.
  - user:
      simulate: You are a customer whose order 4711 is late.
      until: the agent confirms the cancellation
      max_turns: 2
{extra}  - assert: reply contains cancelled
"""
)


def flow(tmp_path: Path, extra: str = "") -> FlowSpec:
    path = tmp_path / "simulated.flow.yaml"
    path.write_text(FLOW.format(extra=textwrap.indent(extra, "      ")))
    return load_spec(path)


def agent_call(number: int, model: str = "gpt-4o-mini") -> Turn:
    request = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    answer = {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    return Turn("openai-chat", request, 200, answer, conversation_turn=number)


def outcome(number: int, message: str, step: int, *output: str) -> TurnOutcome:
    return TurnOutcome(number, message, step, step > 1, list(output), ended=True)


def walk(
    spec: FlowSpec, session: CassetteSession, said: Sequence[Sequence[str]]
) -> list[UserMessage]:
    """The user side run as a dialogue runs it: each message gets the output `said[k]`."""
    assert session.conversation is not None
    next_message = user_side(spec, session, session.conversation)
    done: list[TurnOutcome] = []

    async def run() -> list[UserMessage]:
        messages = []
        while (message := await next_message(done)) is not None:
            messages.append(message)
            output = said[len(done)] if len(done) < len(said) else []
            done.append(TurnOutcome(len(done) + 1, message.text, message.step, message.simulated))
            done[-1].output, done[-1].ended = list(output), True
            if session.mode is Mode.REPLAY:
                session.served.append(0)  # the agent's call of each turn, served
        return messages

    return asyncio.run(run())


def user_fake(answers: Sequence[str]) -> Any:
    """A fake model that answers the simulated user's calls with `answers` in order."""
    calls = iter(answers)

    def script(dialect: str, body: dict[str, Any]) -> Reply:
        return Reply(text=next(calls))

    return FakeUpstream(script=script, seed=1)


def recording(fake: FakeUpstream) -> CassetteSession:
    upstream = Upstream(f"{fake.base_url}/v1", key="sk-user-123456", timeout_s=10)
    session = CassetteSession(Mode.RECORD, upstream=upstream, conversation=OpenTurn(id="c1"))
    session.recorded.append(agent_call(1))  # the agent's call in turn 1
    return session


# -- record -----------------------------------------------------------------------------------


def test_record_asks_the_model_per_turn_until_done_and_keeps_the_user_lane(
    tmp_path: Path,
) -> None:
    spec = flow(tmp_path)
    with user_fake(["Where is it?", DONE]) as fake:
        session = recording(fake)
        messages = walk(spec, session, [["It shipped."], ["It is cancelled."]])
        asked = fake.model_requests()
    assert [(m.text, m.step, m.simulated) for m in messages] == [
        ("My order 4711 has not arrived.", 1, False),
        ("Where is it?", 2, True),
    ]
    assert session.errors == []
    lane = session.conversation.user_lane  # type: ignore[union-attr]
    assert [call.answer for call in lane] == ["Where is it?", DONE]
    assert asked[0].headers["authorization"] == "Bearer sk-user-123456"
    assert asked[0].body["model"] == "gpt-4o-mini"  # the agent's most recent chat call's
    roles = [(m["role"], m["content"]) for m in asked[1].body["messages"]]
    assert roles[1:] == [
        ("user", OPENING),
        ("assistant", "My order 4711 has not arrived."),
        ("user", "It shipped."),
        ("assistant", "Where is it?"),
        ("user", "It is cancelled."),
    ]
    assert roles[0] == ("system", system_prompt(spec.conversation[1].simulated))  # type: ignore[arg-type]


def test_max_turns_reached_fails_naming_the_step_and_its_goal(tmp_path: Path) -> None:
    spec = flow(tmp_path)
    with user_fake(["Where is it?", "And now?", "Still waiting."]) as fake:
        session = recording(fake)
        messages = walk(spec, session, [["a"], ["b"], ["c"]])
    assert len(messages) == 3  # the written one and max_turns: 2 simulated
    assert session.errors == [
        "the simulated user of the `user:` step at line 9 did not reach its goal "
        '"the agent confirms the cancellation" within 2 turns (asked after turn 3, it '
        'answered "Still waiting." instead of DONE)'
    ]


def test_a_simulated_user_speaking_first_without_a_model_fails_with_the_fix(
    tmp_path: Path,
) -> None:
    spec = flow(tmp_path)
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9/v1"))
    session.conversation = OpenTurn(id="c1")  # the agent made no call in turn 1
    assert len(walk(spec, session, [[]])) == 1
    (error,) = session.errors
    assert error.startswith(
        "the simulated user of the `user:` step at line 9 speaks before the agent made any "
        "model call"
    )
    assert "Fix: add `model: openai/gpt-4o-mini`" in error


def test_its_own_model_is_asked_in_its_providers_dialect(tmp_path: Path) -> None:
    spec = flow(tmp_path, "model: anthropic/claude-sonnet-4-5\n")
    with user_fake([DONE]) as fake:
        session = recording(fake)
        walk(spec, session, [["ok"]])
        (asked,) = fake.model_requests()
    assert asked.path == "/v1/messages" and asked.headers["x-api-key"] == "sk-user-123456"
    assert asked.body["model"] == "claude-sonnet-4-5"
    assert asked.body["system"] == system_prompt(spec.conversation[1].simulated)  # type: ignore[arg-type]


def test_an_upstream_error_fails_the_record_without_the_key(tmp_path: Path) -> None:
    def script(dialect: str, body: dict[str, Any]) -> Reply:
        return Reply(status=401, error_body={"error": {"message": "bad key sk-user-123456"}})

    with FakeUpstream(script=script) as fake:
        session = recording(fake)
        walk(flow(tmp_path), session, [["ok"]])
    (error,) = session.errors
    assert "the upstream model answered the simulated user of the `user:` step at line 9 " in error
    assert "HTTP 401" in error and "sk-user-123456" not in error


def test_a_signing_provider_is_refused(tmp_path: Path) -> None:
    spec = flow(tmp_path)
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9/v1"))
    session.conversation = OpenTurn(id="c1")
    session.recorded.append(agent_call(1))
    session.signers = {"openai": object()}  # type: ignore[dict-item]
    walk(spec, session, [["ok"]])
    assert "whose calls record signs" in session.errors[0]


def test_an_agent_dialect_without_a_plain_request_is_refused(tmp_path: Path) -> None:
    spec = flow(tmp_path)
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9/v1"))
    session.conversation = OpenTurn(id="c1")
    body = {"model": "llama3", "messages": [{"role": "user", "content": "hi"}]}
    answer = {"message": {"role": "assistant", "content": "ok"}, "done": True}
    session.recorded.append(Turn("ollama-chat", body, 200, answer, conversation_turn=1))
    walk(spec, session, [["ok"]])
    assert "not in ollama-chat" in session.errors[0]
    assert "Fix: name its model, e.g. `model: openai/gpt-4o-mini`" in session.errors[0]


# -- replay -----------------------------------------------------------------------------------


def recorded_lane(tmp_path: Path, answers: Sequence[str], said: Sequence[Sequence[str]]) -> Any:
    """The user lane a record of `flow` leaves, and its session's recorded agent calls."""
    with user_fake(answers) as fake:
        session = recording(fake)
        walk(flow(tmp_path), session, said)
    assert session.errors == [], session.errors
    return session.conversation.user_lane  # type: ignore[union-attr]


def replaying(lane: list[UserCall]) -> CassetteSession:
    conversation = OpenTurn(id="c1", user_lane=list(lane))
    return CassetteSession(Mode.REPLAY, recorded=[agent_call(1)], conversation=conversation)


def test_replay_answers_from_the_lane_with_no_model(tmp_path: Path) -> None:
    said = [["It shipped."], ["It is cancelled."]]
    lane = recorded_lane(tmp_path, ["Where is it?", DONE], said)
    session = replaying(lane)  # no upstream at all: a call would fail
    messages = walk(flow(tmp_path), session, said)
    assert [m.text for m in messages] == ["My order 4711 has not arrived.", "Where is it?"]
    assert session.divergence is None and session.errors == []
    assert session.conversation.user_served == 2  # type: ignore[union-attr]


def test_a_changed_reply_diverges_on_the_user_lane_naming_the_turn(tmp_path: Path) -> None:
    said = [["It shipped."], ["Which order?"], ["It is cancelled."]]
    lane = recorded_lane(tmp_path, ["Where is it?", "Cancel it.", DONE], said)
    session = replaying(lane)
    stopped: list[bool] = []
    session.on_divergence = lambda: stopped.append(True)
    walk(flow(tmp_path), session, [["It shipped."], ["Which order, sir?"]])
    divergence = session.divergence
    assert divergence is not None and stopped == [True]
    assert divergence.summary == (
        "the user lane, call 2: the simulated user was told something different in turn 2: "
        "the agent's reply changed"
    )
    assert divergence.details == (
        "what it read (- recorded, + now):",
        "- Which order?",
        "+ Which order, sir?",
    )
    assert divergence.conversation_turn == 2
    assert divergence.to_json()["lane"] == "user"


def test_a_changed_persona_model_or_length_is_worded(tmp_path: Path) -> None:
    lane = recorded_lane(tmp_path, ["Where is it?", DONE], [["It shipped."], ["Gone."]])
    first = lane[0]
    other = dict(first.request, model="gpt-4o")
    said = told_differently("at", first, "openai-chat", other, [])
    assert said.summary == (
        "at: the model that plays the simulated user changed: recorded openai-chat "
        "gpt-4o-mini, now openai-chat gpt-4o"
    )
    messages = [dict(m) for m in first.request["messages"]]
    messages[0]["content"] = "another persona"
    said = told_differently("at", first, "openai-chat", {**first.request, "messages": messages}, [])
    assert said.summary.startswith("at: its persona or goal changed")
    longer = {**first.request, "messages": [*first.request["messages"], *messages[-2:]]}
    said = told_differently("at", first, "openai-chat", longer, [])
    assert said.summary == "at: it was asked after 2 turn(s), the recording asked it after 1"
    messages = [dict(m) for m in first.request["messages"]]
    messages[2]["content"] = "My order 4712 has not arrived."
    said = told_differently("at", first, "openai-chat", {**first.request, "messages": messages}, [])
    assert said.summary.endswith("in turn 1: the user's message changed")


def test_a_call_beyond_the_lane_is_a_divergence(tmp_path: Path) -> None:
    session = replaying([])
    walk(flow(tmp_path), session, [["It shipped."]])
    assert session.divergence is not None
    assert session.divergence.summary == (
        "the user lane, call 1: the simulated user of the `user:` step at line 9 asked the "
        "model after turn 1, beyond the 0 call(s) of the simulated user recorded"
    )


def test_output_read_is_the_printed_lines_or_a_placeholder(tmp_path: Path) -> None:
    with user_fake([DONE]) as fake:
        session = recording(fake)
        walk(flow(tmp_path), session, [[]])
        (asked,) = fake.model_requests()
    assert asked.body["messages"][-1] == {"role": "user", "content": NOTHING_PRINTED}


# -- the lane in the trace ---------------------------------------------------------------------


def test_the_user_lane_round_trips_through_the_trace(tmp_path: Path) -> None:
    lane = recorded_lane(tmp_path, ["Where is it?", DONE], [["It shipped."], ["Gone."]])
    conversation = RecordedConversation("c1", ("hi", "Where is it?"), (False, True), tuple(lane))
    trace = Trace(flow="f", turns=[agent_call(1)], conversation=conversation)
    text = dumps(trace)
    assert "  user:\n  - step: 2\n    protocol: openai-chat\n    request:\n" in text
    assert "    answer: DONE\n" in text
    assert loads(text).conversation == conversation
    assert dumps(loads(text)) == text


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (("  user:\n  - step: 2", "  user:\n  - step: two"), "its `step` is 'two'"),
        (("protocol: openai-chat", "protocol: smoke"), "unknown protocol 'smoke'"),
        (("    answer: DONE", "    answer: [1]"), "its `answer` is [1]"),
        (("  user:\n  - step: 2", "  user: 3\n  x:\n  - step: 2"), "must be a list of calls"),
    ],
)
def test_a_malformed_user_lane_names_file_line_and_call(
    tmp_path: Path, edit: tuple[str, str], problem: str
) -> None:
    lane = recorded_lane(tmp_path, [DONE], [["It shipped."]])
    conversation = RecordedConversation("c1", ("hi",), (False,), tuple(lane))
    text = dumps(Trace(flow="f", turns=[agent_call(1)], conversation=conversation))
    assert edit[0] in text
    line = text.splitlines().index("conversation:") + 1
    with pytest.raises(TraceError) as info:
        loads(text.replace(edit[0], edit[1]), "x.trace.yaml")
    assert str(info.value).startswith(f"x.trace.yaml:{line}: ")
    assert problem in str(info.value)


# -- the request per dialect ----------------------------------------------------------------------


@pytest.mark.parametrize("name", PLAIN)
def test_each_plain_dialect_builds_a_request_it_reads_back(name: str) -> None:
    dialect = dialect_named(name)
    messages = [("user", OPENING), ("assistant", "Hi."), ("user", "Hello, how can I help?")]
    path, request = dialect.plain_request("m-1", "the system", messages)
    assert dialect.outline(request).model == "m-1"
    texts = [text_of(message.content) for message in dialect.outline(request).messages]
    assert texts == ["the system", OPENING, "Hi.", "Hello, how can I help?"]
    assert dialect.unreadable_field(request) is None
    answer = dialect.canned_response(request, "Where is my order?")
    assert dialect.read_answer(request, answer, 1).text == "Where is my order?"  # type: ignore[union-attr]
    assert dialect.upstream_url_for_path("http://h/v1", path).startswith("http://h/v1")
    json.dumps(dialect.upstream_body(request))


def test_the_gemini_request_names_its_model_in_the_path() -> None:
    path, request = dialect_named("gemini").plain_request("gemini-2.5-flash", "s", [("user", "x")])
    assert path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert request["model"] == "gemini-2.5-flash"
    assert "model" not in dialect_named("gemini").upstream_body(request)


def test_every_other_dialect_refuses_clearly() -> None:
    for dialect in DIALECTS:
        if dialect.name in PLAIN:
            continue
        with pytest.raises(PlainRequestRefused) as info:
            dialect.plain_request("m", "s", [("user", "x")])
        assert f"not in {dialect.name}" in str(info.value)
    assert all(dialect_named(name).kind == CHAT for name in PLAIN)


def test_model_must_name_a_provider_it_can_ask(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        flow(tmp_path, "model: bedrock/claude\n")
    assert "`model` of a simulated `user:` is 'bedrock/claude'" in str(info.value)
    assert "Fix: write e.g. `model: openai/gpt-4o-mini`" in str(info.value)
    assert SimulatedUser(simulate="a", until="b", model="gemini/g").model == "gemini/g"


def test_sees_reply_reads_the_turns_model_reply(tmp_path: Path) -> None:
    spec = flow(tmp_path, "sees: reply\n")
    with user_fake([DONE]) as fake:
        session = recording(fake)  # the agent's call in turn 1 answered "ok"
        walk(spec, session, [['{"type":"result"}']])
        (asked,) = fake.model_requests()
    assert asked.body["messages"][-1] == {"role": "user", "content": "ok"}


def test_a_url_agents_conversation_is_played_by_the_same_user_side(tmp_path: Path) -> None:
    path = tmp_path / "service.flow.yaml"
    text = FLOW.format(extra="").replace(
        "  command: python bot.py\n  conversation:\n    until: '^> $'\n",
        "  url: http://127.0.0.1:9/chat\n  proxy_port: 18999\n",
    )
    path.write_text(text)
    spec = load_spec(path)
    posted: list[tuple[str, dict[str, Any]]] = []

    async def post(message: str, *, fields: dict[str, Any]) -> TriggerOutcome:
        posted.append((message, fields))
        return TriggerOutcome(200, f"answer {fields['turn']}", timed_out=False, error=None)

    with user_fake(["Where is it?", DONE]) as fake:
        session = recording(fake)
        turns: list[TurnOutcome] = []
        asyncio.run(converse_service(spec, session, post, turns))
        asked = fake.model_requests()
    assert [message for message, _ in posted] == ["My order 4711 has not arrived.", "Where is it?"]
    assert [turn.simulated for turn in turns] == [False, True]
    assert asked[0].body["messages"][-1] == {"role": "user", "content": "answer 1"}
