"""What a syscall handler (network.py, filesystem.py, lookups.py) may ask of the
supervisor that calls it: `Host`, the supervisor as its handlers see it.

The supervisor builds its handlers and routes notifications to them; the handlers only
answer through it. Typing them against this protocol, not the supervisor class, keeps the
imports one way: supervisor.py imports the handlers, never the reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from flowproof_cli.egress.kernel import Listener, Notification
from flowproof_cli.egress.policy import Policy
from flowproof_cli.egress.report import EgressReport

Handler = Callable[[Notification], None]
Action = Callable[[int], tuple[int, int]]  # on our duplicate of the agent's fd -> (value, errno)


class Host(Protocol):
    """The supervisor's side of a handler: the listener to answer on, the policy, the
    report, and the calls every handler uses (supervisor.Supervisor implements it)."""

    listener: Listener
    policy: Policy
    report: EgressReport

    def register(self, number: int, handler: Handler, *, observe_only: bool = False) -> None:
        """Route the syscall `number` to `handler`."""

    def now_ms(self) -> int:
        """Milliseconds since the agent started."""

    def deny(self, n: Notification, error: int) -> None:
        """Refuse the call with `error`."""

    def read(self, n: Notification, address: int, length: int) -> bytes:
        """A copy of the caller's memory."""

    def duplicate(self, n: Notification, fd: int) -> int:
        """The caller's descriptor, duplicated."""

    def perform(self, n: Notification, fd: int, action: Action, *, local: bool = False) -> None:
        """Run `action` on a duplicate of the caller's socket and answer with its result."""
