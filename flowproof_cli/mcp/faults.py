"""MCP faults: which `tools/call` of one server a fault hits, and what answers it.

`at: mcp NAME call N` names the N-th *distinct* `tools/call` the agent makes to server NAME.
The first `times` attempts of that call are answered with the fault; the next identical
request (the same canonical params: ids and volatile `_meta` never count) is its retry,
served the recorded answer (at record: forwarded to the real server). A different
`tools/call` after the fault is the next call, and the faulted one is never retried. Other
methods (`tools/list`, a ping) neither count nor end the wait for a retry.

The same state machine decides at record (the stdio stand-in, the HTTP record session) and
at replay (the replayer), fed the same requests in the same order, so a fault lands on the
same call both times. Nothing here does I/O: `decide` says what a request is, the caller
answers it (a JSON-RPC error, an `isError` result, the server's death, or silence).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from flowproof_cli.canonical import canonical_json
from flowproof_cli.faults.plan import CRASH, HANG, MCP_ERROR, TOOL_ERROR, Fault

TOOLS_CALL = "tools/call"


@dataclass(frozen=True)
class Decision:
    """What one request is. `fault`: answer it with that fault (`again`: a repeated attempt
    of a call already faulted, not a new call). `retry_of`: the identical retry of a faulted
    call, served that call's recorded answer. Neither: an ordinary request."""

    fault: Fault | None = None
    again: bool = False
    retry_of: Fault | None = None


ORDINARY = Decision()


@dataclass
class _Open:
    fault: Fault
    key: str  # the canonical params of the faulted request
    attempts: int = 1


def server_faults(faults: Iterable[Fault], server: str) -> tuple[Fault, ...]:
    """The faults of `faults` that hit MCP server `server`, in order."""
    return tuple(f for f in faults if f.at.boundary == "mcp" and f.at.server == server)


class McpFaults:
    """One server's faults, and how many attempts each has faulted so far (`applied`)."""

    def __init__(self, server: str, faults: Iterable[Fault] = ()):
        self.server = server
        self.faults = server_faults(faults, server)
        self._by_call = {fault.at.call: fault for fault in self.faults}
        self.tool_calls = 0  # distinct tools/call requests so far
        #: fault.label -> attempts faulted (a fault never applied is absent)
        self.applied: dict[str, int] = {}
        self._open: _Open | None = None

    def __bool__(self) -> bool:
        return bool(self.faults)

    def decide(self, method: str, params: Any) -> Decision:
        """What the request (its canonical method and params) is; counts it."""
        if method != TOOLS_CALL or not self.faults:
            return ORDINARY
        key = canonical_json(params)
        opened = self._open
        if opened is not None and opened.key == key:
            if opened.attempts < opened.fault.times:
                opened.attempts += 1
                self._count(opened.fault)
                return Decision(opened.fault, again=True)
            self._open = None
            return Decision(retry_of=opened.fault)
        self._open = None
        self.tool_calls += 1
        fault = self._by_call.get(self.tool_calls)
        if fault is None:
            return ORDINARY
        self._open = _Open(fault, key)
        self._count(fault)
        return Decision(fault)

    def _count(self, fault: Fault) -> None:
        self.applied[fault.label] = self.applied.get(fault.label, 0) + 1


def fault_answer(fault: Fault, *, modern: bool = False) -> dict[str, Any] | None:
    """The answer a faulted attempt gets, without id: `{"error": ...}` or `{"result": ...}`;
    None for a crash or a hang (no answer at all)."""
    if fault.kind == MCP_ERROR:
        value = fault.value if isinstance(fault.value, dict) else {}
        return {"error": {"code": value.get("code"), "message": value.get("message")}}
    if fault.kind == TOOL_ERROR:
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": str(fault.value)}],
            "isError": True,
        }
        if modern:
            result["resultType"] = "complete"
        return {"result": result}
    if fault.kind in (CRASH, HANG):
        return None
    raise ValueError(f"{fault.label} is not an MCP fault")
