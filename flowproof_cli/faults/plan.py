"""The fault value every layer shares: where (`CallAt`) and what (`Fault`).

The spec builds these from `faults:` (spec/faults.py), the trace stores them (its `faults:`
section, so a replay knows what its recording was made with), the model boundary and the MCP
lanes apply them. Nothing here reads YAML lines or HTTP: a `Fault` is plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: Model-call kinds: the value each holds is in `Fault.value`'s comment.
ANSWER = "answer"  # an HTTP status in the provider's error shape (value: the status)
RESET = "reset"  # the connection closed without an answer (value: None)
DELAY = "delay"  # the recorded answer after a wait (value: seconds)
CUT = "cut"  # the stream ends after N chunks, no terminal event (value: N)
ERROR_EVENT = "error_event"  # the dialect's in-band error event after N chunks (value: N)
MALFORMED = "malformed"  # a broken answer (value: one of MALFORMED_FORMS)
#: MCP-call kinds.
MCP_ERROR = "mcp_error"  # a JSON-RPC error (value: {"code": int, "message": str})
TOOL_ERROR = "tool_error"  # a tools/call result with isError (value: its text)
CRASH = "crash"  # the server exits (stdio) / the connection drops (HTTP) (value: None)
HANG = "hang"  # no answer ever (the flow's timeout ends it) (value: None)

MODEL_KINDS = (ANSWER, RESET, DELAY, CUT, ERROR_EVENT, MALFORMED)
MCP_KINDS = (MCP_ERROR, TOOL_ERROR, CRASH, HANG)
#: Kinds that need the model's real answer to alter it: record forwards the call once.
ALTERING_KINDS = frozenset({DELAY, CUT, ERROR_EVENT, MALFORMED})
MALFORMED_FORMS = ("tool_arguments", "unknown_tool", "empty", "truncated", "refusal")


@dataclass(frozen=True)
class CallAt:
    """Which call a fault hits: the N-th model call of the flow (or of conversation turn
    `turn`), or the N-th `tools/call` of MCP server `server`. A retry of the same request
    is not a new call."""

    boundary: Literal["model", "mcp"]
    call: int  # 1-based
    turn: int | None = None  # model only: counted within this conversation turn
    server: str | None = None  # mcp only

    def __str__(self) -> str:
        if self.boundary == "mcp":
            return f"mcp {self.server} call {self.call}"
        prefix = f"turn {self.turn} " if self.turn is not None else ""
        return f"{prefix}model call {self.call}"


@dataclass(frozen=True)
class Fault:
    at: CallAt
    kind: str  # one of MODEL_KINDS or MCP_KINDS
    value: Any = None  # the kind's parameter (see the kind constants above)
    retry_after: float | None = None  # ANSWER only: seconds, sent as the provider sends it
    times: int = 1  # consecutive faulted answers before the recording serves
    #: The spec line of its `- at:` entry, for messages; not stored, not compared.
    line: int | None = field(default=None, compare=False)

    @property
    def what(self) -> str:
        """The fault as a spec writes it: `answer: 429`, `stream: cut after 4 chunks`."""
        value = self.value
        if self.kind == ANSWER:
            return f"answer: {value}" + (
                f", retry_after: {self.retry_after:g}" if self.retry_after is not None else ""
            )
        if self.kind == RESET:
            return "connection: reset"
        if self.kind == DELAY:
            return f"delay: {value:g}"
        if self.kind == CUT:
            return f"stream: cut after {value} chunks"
        if self.kind == ERROR_EVENT:
            return f"stream: error event after {value} chunks"
        if self.kind == MALFORMED:
            return f"malformed: {value}"
        if self.kind == MCP_ERROR:
            return f"error: {{code: {value['code']}, message: {value['message']}}}"
        if self.kind == TOOL_ERROR:
            return f"tool_error: {value}"
        return self.kind  # crash, hang

    @property
    def label(self) -> str:
        """`model call 2: answer: 429 (times 2)`: how reports and the trace name it."""
        times = f" (times {self.times})" if self.times != 1 else ""
        return f"{self.at}: {self.what}{times}"

    @property
    def alters_answer(self) -> bool:
        return self.kind in ALTERING_KINDS


def faults_to_document(faults: tuple[Fault, ...]) -> list[dict[str, Any]]:
    """The trace's `faults:` section: one mapping per fault, in spec order."""
    documents = []
    for fault in faults:
        entry: dict[str, Any] = {"at": str(fault.at), "kind": fault.kind}
        if fault.value is not None:
            entry["value"] = fault.value
        if fault.retry_after is not None:
            entry["retry_after"] = fault.retry_after
        if fault.times != 1:
            entry["times"] = fault.times
        documents.append(entry)
    return documents


def call_at(text: str) -> CallAt | None:
    """`model call 2`, `turn 2 model call 1`, `mcp NAME call 2` read back; None otherwise."""
    words = text.split()
    try:
        if len(words) == 3 and words[:2] == ["model", "call"]:
            return CallAt("model", int(words[2]))
        if len(words) == 5 and words[0] == "turn" and words[2:4] == ["model", "call"]:
            return CallAt("model", int(words[4]), turn=int(words[1]))
        if len(words) == 4 and words[0] == "mcp" and words[2] == "call":
            return CallAt("mcp", int(words[3]), server=words[1])
    except ValueError:
        return None
    return None


def faults_from_document(documents: Any) -> tuple[Fault, ...] | str:
    """The faults a trace's `faults:` section holds, or what is wrong with it."""
    if not isinstance(documents, list):
        return "`faults` is not a list"
    faults = []
    for number, entry in enumerate(documents, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("at"), str):
            return f"fault {number} has no `at`"
        at = call_at(entry["at"])
        kind = entry.get("kind")
        if at is None or kind not in (*MODEL_KINDS, *MCP_KINDS):
            return f"fault {number} (`{entry.get('at')}`, kind {kind!r}) is not one flowproof reads"
        times = entry.get("times", 1)
        retry_after = entry.get("retry_after")
        if not isinstance(times, int) or isinstance(times, bool) or times < 1:
            return f"fault {number} has `times: {times!r}`, not a whole number >= 1"
        if retry_after is not None and not isinstance(retry_after, int | float):
            return f"fault {number} has `retry_after: {retry_after!r}`, not a number"
        faults.append(Fault(at, kind, entry.get("value"), retry_after, times))
    return tuple(faults)
