"""What one agent run was contained under, what it was refused, and what it destroyed.

`EgressReport.stderr_lines()` is the whole report, as a run's result carries it (and
`--json` shows it). `printed_lines()` shapes it for stderr under `--fs-report`: a long
filesystem observation is summarized (one agent run deleted 262 files and buried its one
blocked destination), and blocked egress is printed first in every mode but `full`, which
is the report as it is.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

ENFORCED = "enforced (linux seccomp)"
OBSERVED = "observed (linux seccomp)"
FS_HEADER = "filesystem observation: "
BLOCKED_HEADER = re.compile(r"egress report: \d+ blocked call\(s\)$")
#: `--fs-report` values: every line, a summary when long, no filesystem report.
FS_REPORT_MODES = ("full", "summary", "off")
SUMMARY_ABOVE = 12  # filesystem lines (syscalls and faults) printed whole up to this many
SUMMARY_FIRST = 5  # syscalls listed by a summary, the earliest first
_EVENT = re.compile(r"  (\S+) (.*) at (\d+)ms$")


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


MAX_QUERIES = 8  # names kept for one refused call (a resolver asks for a name or two)


@dataclass(frozen=True)
class Blocked:
    """One refused call: the destination it named, its protocol, ms after the agent started,
    and for a DNS lookup the names it asked for (egress/dns.py; added as they are read)."""

    destination: str
    protocol: str
    at_ms: int
    syscall: str = "connect"
    queries: list[str] = field(default_factory=list, compare=False, hash=False)

    def to_trace(self) -> dict[str, Any]:
        return {"destination": self.destination, "protocol": self.protocol, "at_ms": self.at_ms}

    @property
    def attempt(self) -> str:
        """What was attempted, as the report and `assert_no_egress` name it: the address,
        or the names a DNS lookup asked for (`dns registry.npmjs.org`)."""
        if self.queries:
            return f"dns {', '.join(self.queries)}"
        return f"{self.protocol} {self.destination}"

    @property
    def via(self) -> str:
        """How: the syscall, and for a named lookup the resolver it was sent to."""
        if self.queries:
            return f"{self.protocol} {self.destination}, {self.syscall}"
        return self.syscall


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

    def add_query(self, item: Blocked, name: str) -> None:
        """A name the refused lookup `item` asked for (each once, at most MAX_QUERIES)."""
        with self._lock:
            if name not in item.queries and len(item.queries) < MAX_QUERIES:
                item.queries.append(name)

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

    @property
    def uncontained_reason(self) -> str | None:
        """Why this run was not contained (None when it was): why it cannot certify."""
        if self.containment.enforced:
            return None
        return self.containment.reason or "not contained"

    def refused_attempts(self) -> list[str]:
        """What containment refused, in time order, each with how and when:
        `tcp 203.0.113.9:443 (connect at 12ms)`."""
        return [
            f"{item.attempt} ({item.via} at {item.at_ms}ms)"
            for item in sorted(self.blocked, key=lambda blocked: blocked.at_ms)
        ]

    def trace_section(self) -> list[dict[str, Any]]:
        """Blocked destinations for the trace; only a contained run has any to offer."""
        if not self.containment.enforced:
            return []
        return [item.to_trace() for item in sorted(self.blocked, key=lambda b: b.at_ms)]

    def blocked_lines(self) -> list[str]:
        return [
            f"  blocked {item.attempt} ({item.via}) at {item.at_ms}ms"
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
        lines = [f"{FS_HEADER}{OBSERVED}; {len(events)} destructive syscall(s)"]
        lines.extend(event.line() for event in events)
        lines.extend(f"  fault: {fault}" for fault in self.fs_faults)
        return lines

    def stderr_lines(self) -> list[str]:
        """Everything worth telling the user after a run, beyond the tier line."""
        lines = list(self.notes)
        if self.blocked:
            lines.append(f"egress report: {len(self.blocked)} blocked call(s)")  # BLOCKED_HEADER
            lines.extend(self.blocked_lines())
        lines.extend(self.local_lines())
        lines.extend(self.fs_lines())
        return lines


# -- printing under --fs-report ----------------------------------------------------------


def _sections(lines: Sequence[str]) -> list[list[str]]:
    """A heading line and the indented lines under it."""
    sections: list[list[str]] = []
    for line in lines:
        if line.startswith("  ") and sections:
            sections[-1].append(line)
        else:
            sections.append([line])
    return sections


def summarize_fs(section: Sequence[str]) -> list[str]:
    """A long filesystem report as counts per syscall, the first few, and how many more."""
    header, *body = section
    if len(body) <= SUMMARY_ABOVE:
        return list(section)
    events = [line for line in body if _EVENT.match(line)]
    faults = [line for line in body if line.startswith("  fault: ")]
    counts = Counter(str(match.group(1)) for line in events if (match := _EVENT.match(line)))
    by_count = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    lines = [f"{header} (summary; --fs-report full lists every one)"]
    if by_count:
        lines.append("  per syscall: " + ", ".join(f"{name} {n}" for name, n in by_count))
    lines.extend(events[:SUMMARY_FIRST])
    if len(events) > SUMMARY_FIRST:
        lines.append(f"  ... {len(events) - SUMMARY_FIRST} more")
    lines.extend(faults[:SUMMARY_FIRST])
    if len(faults) > SUMMARY_FIRST:
        lines.append(f"  ... {len(faults) - SUMMARY_FIRST} more fault(s)")
    return lines


def printed_lines(lines: Sequence[str], fs_report: str = "summary") -> list[str]:
    """The report as `--fs-report` prints it on stderr.

    `full` is the report unchanged; `summary` summarizes a long filesystem report; `off`
    drops it. Blocked egress never depends on the mode, and outside `full` it comes first,
    so no amount of filesystem activity can bury it.
    """
    if fs_report == "full":
        return list(lines)
    blocked: list[str] = []
    rest: list[str] = []
    for section in _sections(lines):
        if BLOCKED_HEADER.match(section[0]):
            blocked.extend(section)
        elif section[0].startswith(FS_HEADER):
            rest.extend(summarize_fs(section) if fs_report == "summary" else [])
        else:
            rest.extend(section)
    return blocked + rest
