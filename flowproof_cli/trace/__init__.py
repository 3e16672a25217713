"""Traces: the envelope (what is stored) and storage (how it is written and read)."""

from flowproof_cli.trace.envelope import FORMAT_VERSION, Trace
from flowproof_cli.trace.storage import load, loads, save, trace_path_for

__all__ = ["FORMAT_VERSION", "Trace", "load", "loads", "save", "trace_path_for"]
