"""A call on its way upstream at record: what the model addon forwards (`Forward`) and the
turn its answer becomes (`PendingTurn`). Apart from the session, so the model faults
(`faulted.py`), which the session calls, build them without importing the session back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowproof_cli.cassette.turn import Turn
from flowproof_cli.cassette.upstream import DEFAULT_UPSTREAM_TIMEOUT_S, Upstream
from flowproof_cli.dialects.base import Dialect
from flowproof_cli.faults.plan import Fault


@dataclass(frozen=True)
class Forward:
    """Record: send this request upstream, then hand its answer to `on_upstream_response`."""

    url: str
    body: bytes
    headers: dict[str, str]  # set, replacing the agent's (the record key)
    default_headers: dict[str, str]  # set only when the agent sent none
    pending: PendingTurn
    timeout_s: float = DEFAULT_UPSTREAM_TIMEOUT_S  # the wait for the answer, then a failure


@dataclass(frozen=True)
class PendingTurn:
    dialect: Dialect
    live_request: dict[str, Any]  # as the agent sent it (mocks applied), for rendering
    canonical: dict[str, Any]  # as matched and stored: the match rules applied
    sent: dict[str, Any]  # canonical as the agent sent it, before the match rules
    agent: str | None = None  # `product/version` from its User-Agent, stored with the turn
    transport: str | None = None  # "websocket" when it came as a frame; None over HTTP
    upstream: Upstream | None = None  # record: the one it was forwarded to (its provider's)
    conversation_turn: int | None = None  # the conversation turn open when it was asked
    fault: str | None = None  # the label of the fault that hit the call, kept on its turn
    replaces: int | None = None  # the recorded position of a fault's answer it replaces
    alter: Fault | None = None  # the fault that alters its answer, once it has come

    def turn(self, status: int, response: Any) -> Turn:
        """The recorded turn of this request, with the answer the trace keeps."""
        return Turn(
            self.dialect.name,
            self.canonical,
            status,
            response,
            self.agent,
            self.transport,
            self.conversation_turn,
            self.fault,
        )
