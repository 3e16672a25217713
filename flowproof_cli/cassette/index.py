"""Matching replayed requests to recorded turns through an index over canonical bodies.

The earliest unconsumed equal turn wins and each turn is used once, so a sequential
trajectory matches turn K to turn K while concurrent calls may arrive in any order.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

from flowproof_cli.cassette.turn import Turn, match_key


class TurnIndex:
    def __init__(self, turns: list[Turn]):
        self.turns = turns
        self._free: dict[bytes, deque[int]] = defaultdict(deque)
        for position, turn in enumerate(turns):
            self._free[turn.match_key].append(position)
        self._used: set[int] = set()

    def claim(self, protocol: str, request: dict[str, Any]) -> int | None:
        """Consume and return the position of the earliest unconsumed equal turn."""
        queue = self._free.get(match_key(protocol, request))
        if not queue:
            return None
        position = queue.popleft()
        self._used.add(position)
        return position

    @property
    def used(self) -> set[int]:
        return set(self._used)

    def unconsumed(self) -> list[int]:
        return [i for i in range(len(self.turns)) if i not in self._used]
