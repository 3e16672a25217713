"""Matching replayed requests to recorded turns through an index over canonical bodies.

The earliest unconsumed equal turn wins and each turn is used once, so a sequential
trajectory matches turn K to turn K while concurrent calls may arrive in any order. In a
conversation each recorded turn carries the conversation turn it was made in, and a request
is matched only among the turns of the conversation turn open now.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

from flowproof_cli.cassette.turn import Turn, match_key

#: A match key within its conversation turn (None: a one-turn flow).
_Key = tuple[int | None, bytes]


class TurnIndex:
    def __init__(self, turns: list[Turn]):
        self.turns = turns
        self._free: dict[_Key, deque[int]] = defaultdict(deque)
        for position, turn in enumerate(turns):
            self._free[(turn.conversation_turn, turn.match_key)].append(position)
        self._used: set[int] = set()

    def claim(
        self, protocol: str, request: dict[str, Any], conversation_turn: int | None = None
    ) -> int | None:
        """Consume and return the position of the earliest unconsumed equal turn (of the
        conversation turn open now, in a conversation)."""
        queue = self._free.get((conversation_turn, match_key(protocol, request)))
        if not queue:
            return None
        position = queue.popleft()
        self._used.add(position)
        return position

    def elsewhere(
        self, protocol: str, request: dict[str, Any], conversation_turn: int | None
    ) -> int | None:
        """The conversation turn whose unconsumed recorded calls hold this very request,
        when it is not the one open now (the divergence then says where it belongs)."""
        key = match_key(protocol, request)
        found = [
            tag
            for (tag, other), queue in self._free.items()
            if other == key and queue and tag != conversation_turn
        ]
        return min(found, key=lambda tag: -1 if tag is None else tag) if found else None

    @property
    def used(self) -> set[int]:
        return set(self._used)

    def unconsumed(self, conversation_turn: int | None = None) -> list[int]:
        """The positions not yet served; with `conversation_turn`, only that turn's."""
        return [
            i
            for i in range(len(self.turns))
            if i not in self._used
            and (conversation_turn is None or self.turns[i].conversation_turn == conversation_turn)
        ]
