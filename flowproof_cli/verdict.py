"""The result of one flow: pass or fail with reasons, plus what was observed.

Plain data below every layer that reads it: the runner fills it, evidence records it, the
CLI prints it, and a `-j N` worker sends it to its parent as JSON.

A failure keeps its spec line (and, in a conversation, its turn) as data: the text users read
is rendered from it here, in one place, and nothing parses that text back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Self

from flowproof_cli.errors import ExitCode


@dataclass(frozen=True)
class Failure:
    """Why a flow failed: the message, the spec line of the step that failed (None for a
    flow-wide failure) and the conversation turn it belongs to (None outside one)."""

    message: str
    line: int | None = None
    turn: int | None = None

    @property
    def text(self) -> str:
        """The failure as users read it (text output, JUnit, pytest, the run record's
        message): the message and, when it has one, its step's line."""
        return f"{self.message} (step at line {self.line})" if self.line else self.message

    def __str__(self) -> str:
        return self.text

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "line": self.line, "turn": self.turn}

    @classmethod
    def from_json(cls, data: Any) -> Failure:
        """The inverse of `to_json`, and the plain text an older result or run record holds
        (its line, if any, is already in that text: read as a message, it renders the same)."""
        if isinstance(data, str):
            return cls(data)
        line, turn = data.get("line"), data.get("turn")
        return cls(
            str(data.get("message", "")),
            line if isinstance(line, int) else None,
            turn if isinstance(turn, int) else None,
        )


@dataclass
class FlowResult:
    name: str
    spec_path: Path
    mode: str  # "record" | "replay"
    trace_path: Path
    failures: list[Failure] = field(default_factory=list)
    error: str | None = None  # set when flowproof could not run the flow (exit 2)
    skipped: str | None = None
    duration_s: float = 0.0
    model_calls: int = 0
    mcp_calls: dict[str, int] = field(default_factory=dict)  # calls made, by MCP server name
    recorded_turns: int = 0
    trace_written: bool = False
    agent_exit_code: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    notes: list[str] = field(default_factory=list)  # warnings worth printing on success too
    containment: str | None = None  # "egress containment: ..." for every run of an agent
    egress_report: list[str] = field(default_factory=list)  # stderr: blocked, local, fs
    # Each match rule in force with what it relaxed: {rule, origin, fields, turns, unused}.
    match_rules: list[dict[str, Any]] = field(default_factory=list)
    # The model divergence, if any: {turn, summary, details, message, changes}; each change
    # is {path, kind, recorded, replayed} with both values whole (the message clips them).
    divergence: dict[str, Any] | None = None
    # A passing re-record whose trajectory changed waits beside the trace for approval
    # (runner/rerecord.py): its path until approved or refused, and its trajectory diff.
    candidate_path: Path | None = None
    trajectory_diff: list[str] = field(default_factory=list)
    # A passing record's new trace, complete beside the old one: moved over it only with
    # the verdict (runner/rerecord.py `commit`), so that no signal splits the two. Never
    # printed or stored.
    staged_trace: Path | None = None
    # The files this verdict judged (flowproof_cli.evidence.records): the spec, and the
    # trace read (replay) or written (record).
    spec_sha256: str | None = None
    trace_sha256: str | None = None
    # Why `assert_no_egress` could not certify this run (containment was not enforced).
    capability_error: str | None = None
    # Destinations THIS run's containment refused ({destination, protocol, at_ms}); None
    # when this run was not contained, whatever the trace recorded elsewhere holds.
    egress_blocked: list[dict[str, Any]] | None = None
    # The control row of a flow with `control:` (flowproof_cli.evidence.controls).
    control: dict[str, Any] | None = None
    # A conversation's turns, each with its verdict: {turn, message, step, simulated,
    # model_calls, status (a url agent's answer), ended, passed, failures}; None for one turn.
    conversation: list[dict[str, Any]] | None = None
    # The flow's faults, each {fault, line, applied, not_applicable} (runner/fault_verdicts.py).
    faults: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failure_texts(self) -> list[str]:
        """The failures as users read them (`Failure.text`)."""
        return [failure.text for failure in self.failures]

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures

    @property
    def exit_code(self) -> ExitCode:
        if self.error is not None:
            return ExitCode.ERROR
        return ExitCode.PASSED if self.passed else ExitCode.FAILED

    @property
    def status(self) -> str:
        if self.skipped is not None:
            return "skipped"
        if self.error is not None:
            return "error"
        return "passed" if self.passed else "failed"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["failures"] = [failure.to_json() for failure in self.failures]
        data["spec_path"] = str(self.spec_path)
        data["trace_path"] = str(self.trace_path)
        data["candidate_path"] = str(self.candidate_path) if self.candidate_path else None
        del data["staged_trace"]
        data["status"] = self.status
        data["passed"] = self.passed
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The inverse of `to_json`: how a parallel run reads a worker process's result."""
        known = {item.name for item in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["spec_path"] = Path(values["spec_path"])
        values["trace_path"] = Path(values["trace_path"])
        values["failures"] = [Failure.from_json(item) for item in values.get("failures") or ()]
        if values.get("candidate_path") is not None:
            values["candidate_path"] = Path(values["candidate_path"])
        return cls(**values)
