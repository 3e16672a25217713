"""Which request paths some flowproof boundary answers (everything else is refused)."""

from __future__ import annotations

from flowproof_cli.dialects import route


def is_claimed(path: str) -> bool:
    return route(path) is not None
