"""A recorded turn: one model request (canonical) and the response to replay for it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from flowproof_cli.canonical import canonical_ascii, canonical_json

__all__ = ["Turn", "canonical_json", "match_key"]


@dataclass(frozen=True)
class Turn:
    protocol: str
    request: dict[str, Any]  # canonical request: transport fields removed, mocks applied
    status: int
    response: Any  # the upstream's JSON body (a str when it was not JSON)
    #: `product/version` of the agent that sent the request, from its User-Agent
    #: (match/agents.py); None when it named none, or the trace predates it. Not matched.
    agent: str | None = None
    #: "websocket" for a turn recorded over a WebSocket (dialects/websocket.py); None over
    #: HTTP. Not matched: it says how the agent asked, so replay knows to accept the upgrade.
    transport: str | None = None
    #: The conversation turn (1-based) that was open when the agent made this call; 0 for
    #: a call before the first message; None in a one-turn flow. Not part of the match key:
    #: replay serves a call only from the turn open now (cassette/index.py).
    conversation_turn: int | None = None
    #: The label of the flow fault that hit this call (`model call 2: answer: 429`); None
    #: when none did. Not matched. A turn whose status is not 2xx with a fault is the
    #: fault's own answer, kept because the agent never retried the call.
    fault: str | None = None

    @property
    def fault_only(self) -> bool:
        """Whether this turn holds only a fault's answer (the call was never retried)."""
        return self.fault is not None and not 200 <= self.status < 300

    @cached_property
    def match_key(self) -> bytes:
        """Hashed once per turn: a session built again over the same turns reuses it."""
        return match_key(self.protocol, self.request)


def match_key(protocol: str, request: dict[str, Any]) -> bytes:
    """The index key: protocol and canonical body, hashed (equal exactly when both are)."""
    digest = hashlib.sha256(protocol.encode())
    digest.update(b"\n")
    digest.update(canonical_ascii(request))
    return digest.digest()
