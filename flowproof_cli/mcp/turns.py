"""Which conversation turn each MCP call belongs to, read from when it arrived.

The runner opens turn k (`OpenTurn.open`, which notes the time) before it writes message k,
and opens turn k+1 only after the agent ended turn k. The agent makes turn k's calls after
it read message k and before it printed the line that ends the turn (or answered the
turn's POST). So a call that reached flowproof after turn k opened and before turn k+1
opened is turn k's: a fact of the protocol, never a guess from timing. Both sides read
CLOCK_MONOTONIC (`time.monotonic`), which is system-wide, so the stdio stand-in, another
process, stamps its calls on the same clock as the runner's turns; the streamable-HTTP
boundary stamps them in-process.

Record stores each call's turn in its lane (`conversation_turn`); replay compares the turn
each call is made in with the recorded one, and words what went wrong by turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flowproof_cli.cassette.conversation import turn_label
from flowproof_cli.mcp.lane import Lane


def turn_at(opened: Mapping[int, float], at: float | None) -> int | None:
    """The turn open at `at`: the last opened at or before it (0 before the first);
    None when there is no conversation or no stamp."""
    if at is None or not opened:
        return None
    turn = 0
    for number, when in sorted(opened.items(), key=lambda item: item[1]):
        if when > at:
            break
        turn = number
    return turn


def stamp_lane(lane: Lane, opened: Mapping[int, float]) -> None:
    """Record: each call of `lane` tagged with the turn it arrived in."""
    for call in lane.calls:
        call.conversation_turn = turn_at(opened, call.arrived_at)


@dataclass(frozen=True)
class Turns:
    """A conversation's turns as the MCP verdict words them: when each opened, its message."""

    opened: Mapping[int, float]
    messages: Mapping[int, str]

    def at(self, at: float | None) -> int | None:
        return turn_at(self.opened, at)

    def label(self, number: int) -> str:
        return turn_label(number, self.messages.get(number))


def misplaced_call(
    server: str, lane: Lane, arrivals: Sequence[float], turns: Turns
) -> tuple[int, str] | None:
    """Replay: the first call the agent made in another turn than the recording has it
    in, as (the turn it was made in, the failure); None when every call kept its turn. A
    lane recorded without turns (a one-turn flow) has nothing to compare."""
    for position, at in enumerate(arrivals[: len(lane.calls)]):
        call = lane.calls[position]
        made_in = turns.at(at)
        if call.conversation_turn is None or made_in is None or made_in == call.conversation_turn:
            continue
        failure = (
            f"{turns.label(made_in)}: MCP server {server}, call {position + 1} "
            f"({call.label()}) was recorded in {turns.label(call.conversation_turn)}"
        )
        return made_in, failure
    return None
