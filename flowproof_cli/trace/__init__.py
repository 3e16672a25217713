"""Traces: the envelope (what is stored) and storage (how it is written and read)."""

from flowproof_cli.trace.envelope import FORMAT_VERSION, Trace, other_flow_note
from flowproof_cli.trace.storage import check_writable, load, loads, save, trace_path_for

__all__ = [
    "FORMAT_VERSION",
    "Trace",
    "check_writable",
    "load",
    "loads",
    "other_flow_note",
    "save",
    "trace_path_for",
]
