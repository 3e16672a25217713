"""Egress containment and filesystem observation for `command` agents (Linux seccomp).

The agent runs under a seccomp user-notification filter; a supervisor in flowproof decides
every address-bearing network call against `agent.allow_egress`, performs the allowed ones
itself, refuses the rest, and reports destructive filesystem calls. See docs/egress.md.
Nothing here imports the proxy: the supervisor is its own module.
"""

from flowproof_cli.egress.launcher import Launch, unavailable_reason
from flowproof_cli.egress.policy import AllowEntry, EntryError, Policy, Verdict, parse_entry
from flowproof_cli.egress.report import Blocked, Containment, EgressReport, FsEvent
from flowproof_cli.errors import ContainmentError

__all__ = [
    "AllowEntry",
    "Blocked",
    "Containment",
    "ContainmentError",
    "EgressReport",
    "EntryError",
    "FsEvent",
    "Launch",
    "Policy",
    "Verdict",
    "parse_entry",
    "unavailable_reason",
]
