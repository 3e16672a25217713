"""The `conversation:` section of a trace: what the user said, turn by turn.

A conversation flow's trace keeps the messages its turns were opened with and, for a url
agent, the `conversation_id` every turn's POST carried (fixed at record, so a service keyed
by it sees the same id at replay). The model turns themselves stay in `turns:`, each tagged
with its `conversation_turn`. A trace without this section was recorded as a one-turn flow.

A simulated user's calls to the model are its `user` lane, in the order they were made:
the request flowproof built (keys sorted, like every recorded request) and the text the
model answered. Replay answers the simulated user from it, so the same messages reach the
agent every run, with no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowproof_cli.canonical import sorted_keys
from flowproof_cli.cassette.conversation import UserCall
from flowproof_cli.dialects import dialect_named
from flowproof_cli.errors import TraceError

#: What a call of the user lane holds.
USER_CALL_SHAPE = "`step: <n>`, `protocol: <dialect>`, `request: {...}` and `answer: <text>`"


@dataclass(frozen=True)
class RecordedConversation:
    """The user's side of a recorded conversation."""

    id: str  # the `conversation_id` of a url agent's turns (recorded for every agent)
    messages: tuple[str, ...] = ()  # turn k's message is messages[k - 1]
    simulated: tuple[bool, ...] = ()  # whether turn k's message came from a simulated user
    user: tuple[UserCall, ...] = ()  # the simulated user's calls to the model, in order

    def message(self, number: int) -> str | None:
        return self.messages[number - 1] if 0 < number <= len(self.messages) else None


def conversation_to_document(conversation: RecordedConversation) -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(conversation.messages):
        entry: dict[str, Any] = {"user": message}
        if index < len(conversation.simulated) and conversation.simulated[index]:
            entry["simulated"] = True
        turns.append(entry)
    document: dict[str, Any] = {"id": conversation.id, "turns": turns}
    if conversation.user:  # absent without a simulated user
        document["user"] = [
            {
                "step": call.step,
                "protocol": call.protocol,
                "request": sorted_keys(call.request),
                "answer": call.answer,
            }
            for call in conversation.user
        ]
    return document


def conversation_from_document(section: Any, at: str) -> RecordedConversation:
    """The section as written, or a TraceError naming what is wrong with it (`at`: where
    the section starts, `FILE:LINE`)."""
    if not isinstance(section, dict) or not isinstance(section.get("id"), str):
        raise TraceError(f"{at}: the conversation section is malformed (expected `id: <text>`)")
    turns = section.get("turns", [])
    if not isinstance(turns, list):
        raise TraceError(f"{at}: the conversation's `turns` must be a list of `- user: <text>`")
    messages: list[str] = []
    simulated: list[bool] = []
    for number, entry in enumerate(turns, start=1):
        message = entry.get("user") if isinstance(entry, dict) else None
        if not isinstance(message, str):
            raise TraceError(
                f"{at}: conversation turn {number} is malformed (expected `user: <text>`)"
            )
        messages.append(message)
        simulated.append(entry.get("simulated") is True)
    user = _user_lane(section.get("user", []), at)
    return RecordedConversation(section["id"], tuple(messages), tuple(simulated), user)


def _user_lane(lane: Any, at: str) -> tuple[UserCall, ...]:
    """The `user` lane as written, or a TraceError naming the call that is malformed."""
    if not isinstance(lane, list):
        raise TraceError(
            f"{at}: the conversation's `user` lane must be a list of calls, each with "
            f"{USER_CALL_SHAPE}"
        )
    return tuple(_user_call(entry, number, at) for number, entry in enumerate(lane, start=1))


def _user_call(entry: Any, number: int, at: str) -> UserCall:
    said = f"{at}: call {number} of the conversation's `user` lane is malformed"
    if not isinstance(entry, dict):
        raise TraceError(f"{said} (expected a mapping with {USER_CALL_SHAPE})")
    step, protocol, request, answer = (
        entry.get(k) for k in ("step", "protocol", "request", "answer")
    )
    if type(step) is not int or step < 1:
        raise TraceError(f"{said}: its `step` is {step!r}, not the number of a `user:` step")
    if not isinstance(protocol, str):
        raise TraceError(f"{said}: its `protocol` is {protocol!r}, not a dialect's name")
    try:
        dialect_named(protocol)
    except KeyError as exc:
        raise TraceError(f"{said}: {exc.args[0]}") from None
    if not isinstance(request, dict):
        raise TraceError(f"{said}: its `request` is not a mapping")
    if not isinstance(answer, str):
        raise TraceError(f"{said}: its `answer` is {answer!r}, not the text the model answered")
    return UserCall(step, protocol, request, answer)
