"""The `conversation:` section of a trace: what the user said, turn by turn.

A conversation flow's trace keeps the messages its turns were opened with and, for a url
agent, the `conversation_id` every turn's POST carried (fixed at record, so a service keyed
by it sees the same id at replay). The model turns themselves stay in `turns:`, each tagged
with its `conversation_turn`. A trace without this section was recorded as a one-turn flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowproof_cli.errors import TraceError


@dataclass(frozen=True)
class RecordedConversation:
    """The user's side of a recorded conversation."""

    id: str  # the `conversation_id` of a url agent's turns (recorded for every agent)
    messages: tuple[str, ...] = ()  # turn k's message is messages[k - 1]
    simulated: tuple[bool, ...] = ()  # whether turn k's message came from a simulated user

    def message(self, number: int) -> str | None:
        return self.messages[number - 1] if 0 < number <= len(self.messages) else None


def conversation_to_document(conversation: RecordedConversation) -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(conversation.messages):
        entry: dict[str, Any] = {"user": message}
        if index < len(conversation.simulated) and conversation.simulated[index]:
            entry["simulated"] = True
        turns.append(entry)
    return {"id": conversation.id, "turns": turns}


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
    return RecordedConversation(section["id"], tuple(messages), tuple(simulated))
