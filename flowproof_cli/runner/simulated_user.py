"""The user's side of a conversation: the spec's written `user:` messages in order, and a
simulated user that writes its own at record and sends the very same ones at replay.

A simulated `user:` step is played by a model. At record flowproof asks the record
upstream (the same upstream and key rules as the agent's calls) for the next user message,
once per turn, from a fixed system prompt built of `simulate` and `until` and the
conversation so far, the agent's side being what a user would read of each turn (what it
printed, or with `sees: reply` the model's reply). The model answers `DONE` when the goal
holds; `max_turns` agent turns without that fail the flow, naming the goal. Each call, its
request and the text answered, is kept in the trace's `user` lane.

At replay the request is built exactly the same way and compared with the lane's next
one: equal, it is answered from the lane (no model, no network); different, the flow fails
with a divergence on the user lane that says in words what the simulated user was told
differently, and in which turn. So a simulated conversation replays byte for byte, and a
change in what the agent says is caught even when its own model calls still match.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

from flowproof_cli.cassette.conversation import OpenTurn, UserCall
from flowproof_cli.cassette.divergence import Divergence
from flowproof_cli.cassette.providers import no_upstream_reason
from flowproof_cli.cassette.session import CassetteSession, turn_trajectory
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.cassette.upstream import Upstream
from flowproof_cli.dialects import CHAT, Dialect, dialect_named
from flowproof_cli.dialects.base import JSON, PlainRequestRefused, text_of
from flowproof_cli.mode import Mode
from flowproof_cli.quoting import quoted
from flowproof_cli.runner.turn_outcome import TurnOutcome
from flowproof_cli.spec import FlowSpec
from flowproof_cli.spec.conversation import MODEL_EXAMPLE, SIMULATOR_DIALECTS, SimulatedUser
from flowproof_cli.spec.turns import ConversationTurnSpec

#: The lane a divergence of the simulated user's is on (`Divergence.lane`).
USER_LANE = "user"
#: What the simulated user answers when its goal holds.
DONE = "DONE"
#: The first message of every simulator request: the model is asked to speak first.
OPENING = "(The conversation starts now. Write your first message to the agent.)"
NOTHING_PRINTED = "(the agent printed nothing)"
NO_REPLY = "(the agent's model gave no reply)"
#: The most of one text a failure quotes, and of lines a divergence's diff shows.
SHOWN = 200
DIFF_LINES = 10


class Said(NamedTuple):
    """A message of the user's side: its text, its `user:` step, whether simulated."""

    text: str
    step: int
    simulated: bool = False


def system_prompt(user: SimulatedUser) -> str:
    """The simulated user's fixed instructions: play the user, write only the next
    message, answer exactly DONE when the goal holds."""
    return (
        "You are playing the user in a conversation with an AI agent, to test the agent.\n"
        f"Who you are and what you want: {user.simulate}\n"
        f"Your goal is reached when: {user.until}\n"
        "Each message you are given is what the agent said to you. Answer with only your "
        "next message to the agent, in your own words, with nothing around it. When your "
        f"goal is reached, answer exactly {DONE} and nothing else."
    )


def is_done(answer: str) -> bool:
    return answer.strip().rstrip(".").strip() == DONE


def one_line(answer: str) -> str:
    """The message sent: the answer on one line (an agent reads a message per line)."""
    return " ".join(answer.split())


class _Stopped(Exception):
    """The simulated user cannot go on: the reason is already the session's (an error,
    or the user lane's divergence); the conversation ends here."""


@dataclass(frozen=True)
class _Asked:
    """One simulator request: the dialect and path it goes to, and its normalized body."""

    dialect: Dialect
    path: str
    request: JSON


class UserSide:
    """The next message of a conversation, given the turns so far (runner/conversation.py
    makes it the dialogue's `NextMessage`)."""

    def __init__(self, spec: FlowSpec, session: CassetteSession, lane: OpenTurn) -> None:
        self.turns = spec.conversation
        self.session = session
        self.lane = lane

    async def next_message(self, done: Sequence[TurnOutcome]) -> Said | None:
        index = _resume(self.turns, done)
        while index < len(self.turns):
            turn = self.turns[index]
            if turn.simulated is None:
                return Said(turn.message or "", turn.number)
            try:
                said = await self._simulated(turn, turn.simulated, done)
            except _Stopped:
                return None
            if said is not None:
                return Said(said, turn.number, simulated=True)
            index += 1  # DONE: the next step speaks
        return None

    # -- one simulated message ---------------------------------------------------------

    async def _simulated(
        self, turn: ConversationTurnSpec, user: SimulatedUser, done: Sequence[TurnOutcome]
    ) -> str | None:
        """The simulated user's next message, or None when it said DONE."""
        if self.session.divergence is not None:  # the verdict is settled: nothing to add
            raise _Stopped
        asked = self._request(turn, user, done)
        if self.session.mode is Mode.REPLAY:
            answer = self._replayed(turn, asked, done)
        else:
            answer = await self._recorded(turn, asked)
        if is_done(answer):
            return None
        produced = sum(1 for outcome in done if outcome.step == turn.number)
        if produced >= user.max_turns:
            self._fail(
                f"{_who(turn)} did not reach its goal {json.dumps(user.until)} within "
                f"{user.max_turns} turns (asked after turn {len(done)}, it answered "
                f"{json.dumps(quoted(one_line(answer), SHOWN))} instead of {DONE})"
            )
        message = one_line(answer)
        if not message:
            self._fail(f"{_who(turn)} was answered with no text by the model")
        return message

    def _request(
        self, turn: ConversationTurnSpec, user: SimulatedUser, done: Sequence[TurnOutcome]
    ) -> _Asked:
        dialect, model = self._model(turn, user)
        messages = [("user", OPENING)]
        for outcome in done:
            messages += [("assistant", outcome.message), ("user", self._seen(user, outcome))]
        try:
            path, request = dialect.plain_request(model, system_prompt(user), messages)
        except PlainRequestRefused as exc:
            self._fail(
                f"{_who(turn)} is played by the model of the agent's most recent call: {exc}. "
                f"Fix: name its model, e.g. `{MODEL_EXAMPLE}` under the `user:` step"
            )
        return _Asked(dialect, path, request)

    def _seen(self, user: SimulatedUser, outcome: TurnOutcome) -> str:
        """What a user reads of a turn: what the agent printed, or the model's reply."""
        if user.sees == "reply":
            return turn_trajectory(self.session, outcome.number).reply or NO_REPLY
        return "\n".join(outcome.output).strip() or NOTHING_PRINTED

    def _model(self, turn: ConversationTurnSpec, user: SimulatedUser) -> tuple[Dialect, str]:
        """The dialect and model it is played by: its `model:`, else the agent's most
        recent chat call's."""
        if user.model is not None:
            provider, _, model = user.model.partition("/")
            return dialect_named(SIMULATOR_DIALECTS[provider]), model
        latest = _latest_chat_call(self.session)
        fix = f"Fix: add `{MODEL_EXAMPLE}` (any provider/model) under the `user:` step"
        if latest is None:
            self._fail(
                f"{_who(turn)} speaks before the agent made any model call, so there is no "
                f"model to play it by. {fix}"
            )
        named = latest.request.get("model")
        model = named if isinstance(named, str) else ""
        if not model:
            self._fail(f"{_who(turn)}: the agent's most recent model call names no model. {fix}")
        return dialect_named(latest.protocol), model

    # -- record ------------------------------------------------------------------------

    async def _recorded(self, turn: ConversationTurnSpec, asked: _Asked) -> str:
        """Ask the record upstream; the call joins the user lane."""
        dialect = asked.dialect
        target = self._upstream(turn, dialect)
        url = target.url_for(dialect, asked.path)
        forwarded = dialect.upstream_body(asked.request) or {}
        headers = {
            "content-type": "application/json",
            **dialect.upstream_default_headers(),
            **target.auth_headers(dialect),
        }
        data = json.dumps(forwarded, ensure_ascii=False).encode()
        who = _who(turn)
        try:
            status, raw = await asyncio.to_thread(_post, url, data, headers, target.timeout_s)
        except (OSError, ValueError) as exc:  # URLError, a timeout, a refused connection
            reason = getattr(exc, "reason", exc)
            self._fail(
                f"flowproof: {who} could not reach the upstream model at {target.host}: "
                f"{quoted(str(reason), SHOWN)}"
            )
        raw = target.without_key(raw)
        key = target.key.encode() if target.key else None
        shown = quoted(raw.replace(key, b"[redacted]") if key else raw, SHOWN)
        if not 200 <= status < 300:
            self._fail(f"flowproof: the upstream model answered {who} with HTTP {status}: {shown}")
        try:
            response: Any = json.loads(raw)
            answer = dialect.read_answer(asked.request, response, 0)
            text = getattr(answer, "text", None)
        except Exception as exc:  # any shape an upstream sends: never a traceback
            text, shown = None, f"{shown} ({type(exc).__name__}: {quoted(str(exc), SHOWN)})"
        if not isinstance(text, str):
            self._fail(
                f"flowproof: the upstream model's answer to {who} has no text a "
                f"{dialect.name} answer carries: {shown}"
            )
        self.lane.user_lane.append(UserCall(turn.number, dialect.name, asked.request, text))
        return text

    def _upstream(self, turn: ConversationTurnSpec, dialect: Dialect) -> Upstream:
        session, who = self.session, _who(turn)
        upstreams = session.upstream
        target = upstreams.for_provider(dialect.provider) if upstreams else None
        if target is None:
            reason = no_upstream_reason(dialect.provider, upstreams is None)
            self._fail(f"flowproof: {who} cannot be played: {reason}")
        if dialect.provider in session.signers:
            self._fail(
                f"flowproof: {who} would be played through {dialect.provider}, whose calls "
                "record signs; flowproof does not sign calls of its own. Fix: name another "
                f"model under the `user:` step, e.g. `{MODEL_EXAMPLE}`"
            )
        return target

    # -- replay ------------------------------------------------------------------------

    def _replayed(
        self, turn: ConversationTurnSpec, asked: _Asked, done: Sequence[TurnOutcome]
    ) -> str:
        """The lane's answer when its next call is this very request; otherwise the
        divergence, which ends the conversation."""
        lane, number = self.lane, self.lane.user_served + 1
        at = f"the user lane, call {number}"
        if number > len(lane.user_lane):
            self._diverge(
                Divergence(
                    0,
                    f"{at}: {_who(turn)} asked the model after turn {len(done)}, beyond the "
                    f"{len(lane.user_lane)} call(s) of the simulated user recorded",
                    conversation_turn=len(done),
                    lane=USER_LANE,
                )
            )
        recorded = lane.user_lane[number - 1]
        if (recorded.step, recorded.protocol, recorded.request) == (
            turn.number,
            asked.dialect.name,
            asked.request,
        ):
            lane.user_served = number
            return recorded.answer
        self._diverge(told_differently(at, recorded, asked.dialect.name, asked.request, done))

    # -- ending ------------------------------------------------------------------------

    def _fail(self, message: str) -> NoReturn:
        """The flow fails with `message`; the conversation ends (raises)."""
        self.session.errors.append(message)
        raise _Stopped

    def _diverge(self, divergence: Divergence) -> NoReturn:
        if self.session.divergence is None:
            self.session.divergence = divergence
            if self.session.on_divergence is not None:
                self.session.on_divergence()
        raise _Stopped


def _resume(turns: Sequence[ConversationTurnSpec], done: Sequence[TurnOutcome]) -> int:
    """The index in `turns` of the step that speaks next: the one after the last turn's
    written step, or the last turn's simulated step itself (until it says DONE)."""
    if not done:
        return 0
    index = done[-1].step - 1
    return index if turns[index].simulated is not None else index + 1


def _who(turn: ConversationTurnSpec) -> str:
    where = f"at line {turn.line}" if turn.line else f"number {turn.number}"
    return f"the simulated user of the `user:` step {where}"


def _latest_chat_call(session: CassetteSession) -> Turn | None:
    """The agent's most recent chat call in this flow (at replay: among those served)."""
    for position in reversed(session.used_turns()):
        turn = session.recorded[position]
        if dialect_named(turn.protocol).kind == CHAT:
            return turn
    return None


def _post(url: str, data: bytes, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
    """POST `data`; the status and body, an error status included. No proxy of the
    environment's: record's calls go to the upstream directly, as the agent's do."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    # An http(s) URL: upstream.py checked the base URL it is built on.
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")  # noqa: S310
    try:
        with opener.open(request, timeout=timeout_s) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


# -- the words of a divergence on the user lane ----------------------------------------


def told_differently(
    at: str, recorded: UserCall, protocol: str, request: JSON, done: Sequence[TurnOutcome]
) -> Divergence:
    """`the simulated user was told something different in turn 3: the agent's reply
    changed`, and a short diff of what it read, recorded against now."""
    old_model, new_model = recorded.request.get("model"), request.get("model")
    if (recorded.protocol, old_model) != (protocol, new_model):
        said = (
            f"the model that plays the simulated user changed: recorded {recorded.protocol} "
            f"{old_model}, now {protocol} {new_model}"
        )
        return Divergence(0, f"{at}: {said}", conversation_turn=len(done), lane=USER_LANE)
    old, new = _texts(protocol, recorded.request), _texts(protocol, request)
    if old[:1] != new[:1]:
        said = "its persona or goal changed (`simulate` or `until` of the `user:` step)"
        return _worded(at, said, len(done), old[0] if old else "", new[0] if new else "")
    # [system, opening, message 1, seen 1, message 2, seen 2, ...]
    first = next((i for i in range(2, min(len(old), len(new))) if old[i] != new[i]), None)
    if first is None:
        said = (
            f"it was asked after {(len(new) - 2) // 2} turn(s), the recording asked it after "
            f"{(len(old) - 2) // 2}"
        )
        return Divergence(0, f"{at}: {said}", conversation_turn=len(done), lane=USER_LANE)
    number, seen = (first - 2) // 2 + 1, (first - 2) % 2 == 1
    what = "the agent's reply changed" if seen else "the user's message changed"
    said = f"the simulated user was told something different in turn {number}: {what}"
    return _worded(at, said, number, old[first], new[first])


def _worded(at: str, said: str, turn: int, recorded: str, now: str) -> Divergence:
    return Divergence(
        0, f"{at}: {said}", tuple(read_diff(recorded, now)), conversation_turn=turn, lane=USER_LANE
    )


def read_diff(recorded: str, now: str) -> list[str]:
    """What the simulated user read, recorded against now: the changed lines, `-`
    recorded and `+` now, at most DIFF_LINES of them."""
    lines = [
        f"{line[0]} {quoted(line[2:], SHOWN)}"
        for line in difflib.ndiff(recorded.splitlines() or [""], now.splitlines() or [""])
        if line[:1] in "-+"
    ]
    shown = lines[:DIFF_LINES]
    if len(lines) > DIFF_LINES:
        shown.append(f"... and {len(lines) - DIFF_LINES} more changed line(s)")
    return ["what it read (- recorded, + now):", *shown]


def _texts(protocol: str, request: JSON) -> list[str]:
    """The text of each entry of a simulator request, its system prompt first."""
    try:
        outline = dialect_named(protocol).outline(request)
    except Exception:  # a hand-edited lane: compared as a whole instead
        return [json.dumps(request, sort_keys=True)]
    return [text_of(message.content) for message in outline.messages]
