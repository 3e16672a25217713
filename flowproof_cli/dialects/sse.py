"""Helpers for synthesizing server-sent event streams deterministically."""

from __future__ import annotations

import json
from typing import Any

from flowproof_cli.canonical import compact_json

DELTA_SIZE = 24  # characters per synthesized delta; real servers send small fragments
#: A turn whose text fits in this many DELTA_SIZE pieces streams as it always has.
MAX_DELTAS_PER_TURN = 256
#: A longer one is cut into this many pieces of equal size (each split field may add one
#: short last piece). A streaming client pays per event: a 2 MB answer in 24-character
#: pieces was 83,000 events and took 9 s against 1 s plain; 256 pieces of 8 KB still cost
#: the openai SDK about 3x the plain answer, 16 keep it within 2x (docs/performance.md).
LARGE_ANSWER_DELTAS = 16


def piece_size(response: Any) -> int:
    """The delta size for one turn: DELTA_SIZE while all the text of `response` (every
    string in it, an upper bound on what is split) fits in MAX_DELTAS_PER_TURN pieces of it,
    else a LARGE_ANSWER_DELTAS-th of that text."""
    total, pending = 0, [response]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    if total <= DELTA_SIZE * MAX_DELTAS_PER_TURN:
        return DELTA_SIZE
    return -(-total // LARGE_ANSWER_DELTAS)


def split_deltas(text: str, size: int = DELTA_SIZE) -> list[str]:
    """Split text into several fragments (at least two when it has two characters); `size`
    is the turn's `piece_size`."""
    if not text:
        return []
    if len(text) < 2 * size:
        size = max(1, (len(text) + 1) // 2)
    return [text[i : i + size] for i in range(0, len(text), size)]


def data_event(payload: Any) -> str:
    return f"data: {compact_json(payload)}\n\n"


def named_event(event: str, payload: Any) -> str:
    return f"event: {event}\ndata: {compact_json(payload)}\n\n"


def sse_payloads(data: bytes) -> list[tuple[str, Any]]:
    """(event name, parsed JSON data) of every event of a whole SSE body, in order; events
    whose data is not JSON (`[DONE]`) are skipped. Line ends LF, CRLF or CR."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    found: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        name, lines = "message", []
        for line in block.split("\n"):
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                lines.append(value)
            elif field == "event":
                name = value
        if not lines:
            continue
        try:
            found.append((name, json.loads("\n".join(lines))))
        except ValueError:
            continue
    return found
