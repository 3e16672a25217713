"""One turn of a conversation as it went (`TurnOutcome`): what the dialogue
(`conversation.py`) fills and the user's side (`simulated_user.py`), the turn judge and the
trace read. Its own module, below all of them, so the user's side never imports the
dialogue that asks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowproof_cli.cassette.conversation import turn_label


@dataclass
class TurnOutcome:
    """One turn as it went: its message, what the agent printed for it (without the line
    that ended it), and whether it ended."""

    number: int
    message: str
    step: int
    simulated: bool = False
    output: list[str] = field(default_factory=list)
    ended: bool = False
    status: int | None = None  # a url agent's answer to the turn's POST

    @property
    def label(self) -> str:
        return turn_label(self.number, self.message)
