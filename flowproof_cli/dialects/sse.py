"""Helpers for synthesizing server-sent event streams deterministically."""

from __future__ import annotations

from typing import Any

from flowproof_cli.canonical import compact_json

DELTA_SIZE = 24  # characters per synthesized delta; real servers send small fragments


def split_deltas(text: str, size: int = DELTA_SIZE) -> list[str]:
    """Split text into several fragments (at least two when it has two characters)."""
    if not text:
        return []
    if len(text) < 2 * size:
        size = max(1, (len(text) + 1) // 2)
    return [text[i : i + size] for i in range(0, len(text), size)]


def data_event(payload: Any) -> str:
    return f"data: {compact_json(payload)}\n\n"


def named_event(event: str, payload: Any) -> str:
    return f"event: {event}\ndata: {compact_json(payload)}\n\n"
