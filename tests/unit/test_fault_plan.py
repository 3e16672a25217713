"""The fault value: how it is named, and stored in and read back from a trace."""

from __future__ import annotations

from flowproof_cli.faults.plan import (
    CallAt,
    Fault,
    call_at,
    faults_from_document,
    faults_to_document,
)


def test_a_fault_is_named_as_a_spec_writes_it() -> None:
    fault = Fault(CallAt("model", 2), "answer", 429, 0.2, 2)
    assert fault.label == "model call 2: answer: 429, retry_after: 0.2 (times 2)"
    assert str(CallAt("model", 1, turn=2)) == "turn 2 model call 1"
    mcp = Fault(CallAt("mcp", 2, server="notes"), "tool_error", "database unavailable")
    assert mcp.label == "mcp notes call 2: tool_error: database unavailable"


def test_faults_read_back_from_the_trace_document_equal_those_stored() -> None:
    faults = (
        Fault(CallAt("model", 2), "answer", 429, 0.2, 2, line=7),
        Fault(CallAt("model", 1, turn=3), "cut", 4),
        Fault(CallAt("mcp", 1, server="notes"), "crash"),
    )
    assert faults_from_document(faults_to_document(faults)) == faults


def test_a_damaged_faults_section_says_what_is_wrong() -> None:
    assert faults_from_document({"at": "model call 1"}) == "`faults` is not a list"
    assert "not one flowproof reads" in str(faults_from_document([{"at": "model 1", "kind": "x"}]))
    assert "times" in str(
        faults_from_document([{"at": "model call 1", "kind": "reset", "times": 0}])
    )
    assert call_at("turn x model call 1") is None
