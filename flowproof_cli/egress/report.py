"""What one agent run was contained under, what it was refused, and what it destroyed."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

ENFORCED = "enforced (linux seccomp)"
OBSERVED = "observed (linux seccomp)"


@dataclass(frozen=True)
class Containment:
    """The tier a run ran under: enforced, or not contained with the reason."""

    enforced: bool
    reason: str | None = None

    @property
    def tier(self) -> str:
        return ENFORCED if self.enforced else f"not contained ({self.reason})"

    @property
    def line(self) -> str:
        return f"egress containment: {self.tier}"


@dataclass(frozen=True)
class Blocked:
    """One refused call: the destination it named, its protocol, ms after the agent started."""

    destination: str
    protocol: str
    at_ms: int
    syscall: str = "connect"

    def to_trace(self) -> dict[str, Any]:
        return {"destination": self.destination, "protocol": self.protocol, "at_ms": self.at_ms}


@dataclass(frozen=True)
class FsEvent:
    syscall: str
    detail: str  # "[FLAGS] path", "path", "old -> new", or "unresolved"
    at_ms: int

    def line(self) -> str:
        return f"  {self.syscall} {self.detail} at {self.at_ms}ms"


@dataclass
class EgressReport:
    containment: Containment
    blocked: list[Blocked] = field(default_factory=list)
    local: Counter[str] = field(default_factory=Counter)  # loopback and unix destinations
    fs_events: list[FsEvent] = field(default_factory=list)
    fs_faults: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_blocked(self, item: Blocked) -> None:
        with self._lock:
            self.blocked.append(item)

    def add_local(self, destination: str) -> None:
        with self._lock:
            self.local[destination] += 1

    def add_fs(self, event: FsEvent) -> None:
        with self._lock:
            self.fs_events.append(event)

    def add_fs_fault(self, text: str) -> None:
        with self._lock:
            self.fs_faults.append(text)

    @property
    def certifiable(self) -> bool:
        """Contained, and nothing undeclared was attempted."""
        return self.containment.enforced and not self.blocked

    def trace_section(self) -> list[dict[str, Any]]:
        """Blocked destinations for the trace; only a contained run has any to offer."""
        if not self.containment.enforced:
            return []
        return [item.to_trace() for item in sorted(self.blocked, key=lambda b: b.at_ms)]

    def blocked_lines(self) -> list[str]:
        return [
            f"  blocked {item.protocol} {item.destination} ({item.syscall}) at {item.at_ms}ms"
            for item in sorted(self.blocked, key=lambda b: b.at_ms)
        ]

    def local_lines(self) -> list[str]:
        """Every loopback and unix-socket destination used: loopback is exempt, not proven."""
        if not self.local:
            return []
        lines = [
            f"egress report: {len(self.local)} loopback/unix destination(s) used (exempt; a "
            "local relay could forward off-host)"
        ]
        for destination, count in sorted(self.local.items()):
            lines.append(f"  {destination}" + (f" (x{count})" if count > 1 else ""))
        return lines

    def fs_lines(self) -> list[str]:
        """The filesystem observation report; empty when the run destroyed nothing."""
        if not self.fs_events and not self.fs_faults:
            return []
        events = sorted(self.fs_events, key=lambda event: event.at_ms)
        lines = [f"filesystem observation: {OBSERVED}; {len(events)} destructive syscall(s)"]
        lines.extend(event.line() for event in events)
        lines.extend(f"  fault: {fault}" for fault in self.fs_faults)
        return lines

    def stderr_lines(self) -> list[str]:
        """Everything worth telling the user after a run, beyond the tier line."""
        lines = list(self.notes)
        if self.blocked:
            lines.append(f"egress report: {len(self.blocked)} blocked call(s)")
            lines.extend(self.blocked_lines())
        lines.extend(self.local_lines())
        lines.extend(self.fs_lines())
        return lines
