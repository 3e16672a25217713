"""The conversation turn a session is in, and divergences worded by it.

The runner opens turn k when it sends the user's k-th message and the next one only after
the agent ended turn k, so which turn a model call belongs to is a fact, never a guess from
timing. Record tags each recorded call with it; replay serves a call only from the recorded
calls of the turn open now (`TurnIndex`), and names the turn and its message when it
cannot: `conversation turn 2 ("Then cancel it, please."), model call 1: ...`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from flowproof_cli.cassette.divergence import Divergence
from flowproof_cli.quoting import quoted

#: The most of a turn's message a divergence quotes.
MESSAGE_SHOWN = 80


def turn_label(number: int, message: str | None) -> str:
    """`conversation turn 2 ("Then cancel it, please.")`, or the time before the first."""
    if number == 0:
        return "the conversation, before its first message"
    said = f' ("{quoted(message, MESSAGE_SHOWN)}")' if message else ""
    return f"conversation turn {number}{said}"


@dataclass(frozen=True)
class UserCall:
    """One call of a simulated user to the model (the trace's user lane): the request as
    flowproof built it, in its dialect's normalized form, and the text the model answered
    (`DONE` when the goal held)."""

    step: int  # the `user:` step it played (1-based among them)
    protocol: str  # the dialect it was asked in
    request: dict[str, Any]
    answer: str


@dataclass
class OpenTurn:
    """The conversation turn open now: its number (0 before the first message), its message
    and the model calls the agent made in it so far; and the conversation's id."""

    number: int = 0
    message: str = ""
    calls: int = 0
    #: The `conversation_id` a url agent's turns carry: new at record, the trace's at replay.
    id: str = ""
    #: Every turn opened so far: its message, by number (for the judge's wording).
    messages: dict[int, str] = field(default_factory=dict)
    #: The simulated user's calls: at record those made so far, at replay the trace's.
    user_lane: list[UserCall] = field(default_factory=list)
    #: Replay: how many of `user_lane` were answered so far.
    user_served: int = 0
    #: When each turn opened (CLOCK_MONOTONIC, system-wide): places the MCP calls, which a
    #: stand-in in another process stamps on the same clock, in their turns (mcp/turns.py).
    opened_at: dict[int, float] = field(default_factory=dict)

    def begin(self, number: int) -> None:
        """Turn `number` is open before its message is sent: a conversation without
        `wait_first` is in turn 1 from the agent's start, so a call the agent makes while
        it starts belongs to turn 1 however late the runner gets to write the message."""
        self.number, self.message, self.calls = number, self.messages.get(number, ""), 0
        self.opened_at[number] = time.monotonic()

    def open(self, number: int, message: str) -> None:
        """Turn `number` opens with `message` (one begun already keeps its calls and time)."""
        if number != self.number or number not in self.opened_at:
            self.calls = 0
            self.opened_at[number] = time.monotonic()
        self.number, self.message = number, message
        self.messages[number] = message

    def call(self) -> int:
        """Count one model call of this turn; its number within the turn."""
        self.calls += 1
        return self.calls

    @property
    def label(self) -> str:
        return turn_label(self.number, self.message)

    def worded(
        self, divergence: Divergence, call: int, recorded: int, elsewhere: int | None
    ) -> Divergence:
        """`divergence` (worded by recorded position) worded by this turn instead."""
        _, _, said = divergence.summary.partition(": ")  # after "turn N"
        if divergence.turn == 0:  # nothing left to compare with in this turn
            said = (
                f"extra call: the agent made a model call beyond the {recorded} recorded in "
                "this turn"
            )
        if elsewhere is not None:
            said = (
                f"this call was recorded in {turn_label(elsewhere, self.messages.get(elsewhere))}"
                f", not in this one; {said}"
            )
        return replace(
            divergence,
            summary=f"{self.label}, model call {call}: {said}",
            conversation_turn=self.number,
        )
