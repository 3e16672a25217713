"""Faults on purpose: an error path of the agent, injected at a named call of a flow.

A fault names a call (`model call 2`, `turn 2 model call 1`, `mcp notes call 2`) and what
happens to it (an HTTP status, a cut stream, a delay, a malformed answer, an MCP error). It is
applied identically at record and at replay and travels in the trace like a mock, so a replay
of a faulted flow is as deterministic as any other. `plan.py` holds the value every layer
shares; the model kinds live in `model_kinds/`, the MCP kinds in `flowproof_cli/mcp/`.
"""

from flowproof_cli.faults.plan import (
    MCP_KINDS,
    MODEL_KINDS,
    CallAt,
    Fault,
    faults_from_document,
    faults_to_document,
)

__all__ = [
    "MCP_KINDS",
    "MODEL_KINDS",
    "CallAt",
    "Fault",
    "faults_from_document",
    "faults_to_document",
]
