"""The stdio stand-in's capture file: append-only JSON lines, one write per message.

Each line is written with a single `write(2)` on an `O_APPEND` descriptor, so what was
captured survives an agent that kills the stand-in abruptly, and several stand-in
processes of one server (an agent that spawns it twice) append whole lines side by side.
A torn last line (a kill mid-write) is skipped when reading.

    {"i": "<instance>", "k": "start"}                 the stand-in started
    {"i": "...", "k": "c", "m": {...}, "t": 812.5}    the agent sent m (t: when it arrived,
                                                      CLOCK_MONOTONIC, which the runner's
                                                      conversation turns are timed on too)
    {"i": "...", "k": "c", "m": {...}, "mock": true}  ... a mocked tools/call (not forwarded)
    {"i": "...", "k": "c", "m": {...}, "fault": "<label>", "answer": {...}}
                                                      ... a faulted attempt, answered by
                                                      flowproof with `answer` (none: a crash
                                                      or a hang), never forwarded
    {"i": "...", "k": "c", "m": {...}, "retry_of": "<label>"}
                                                      ... the identical retry of that call
    {"i": "...", "k": "s", "m": {...}}                the server (or a mock) answered m
    {"i": "...", "k": "error", "text": "..."}         the stand-in could not do its job
    {"i": "...", "k": "refused", "text": "..."}       a message flowproof refused
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flowproof_cli.mcp.call_bound import STREAMING_METHODS, call_text
from flowproof_cli.mcp.canonical import CANCELLED, PING, Kind, id_key, kind_of
from flowproof_cli.mcp.lane import Lane, call_label
from flowproof_cli.mcp.recorder import LaneRecorder

START = "start"
CLIENT = "c"
SERVER = "s"
ERROR = "error"  # the stand-in could not do its job (the flow fails)
REFUSED = "refused"  # a message flowproof refused (the flow fails)


class CaptureFile:
    def __init__(self, path: Path, instance: str):
        self.path = path
        self.instance = instance
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._offset = 0  # how far `read_new` has read

    def append(self, kind: str, message: Any = None, **extra: Any) -> None:
        entry: dict[str, Any] = {"i": self.instance, "k": kind}
        if message is not None:
            entry["m"] = message
        if kind == CLIENT:
            entry["t"] = time.monotonic()
        entry.update(extra)
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode())

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Serialise read-then-append between stand-in processes of one server."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def read_new(self) -> list[dict[str, Any]]:
        """Entries appended since the last call (by any process), whole lines only."""
        with self.path.open("rb") as stream:
            stream.seek(self._offset)
            data = stream.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        return list(_parse(data[:end]))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def _parse(data: bytes) -> Iterator[dict[str, Any]]:
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue  # a torn line
        if isinstance(entry, dict):
            yield entry


def read_entries(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return list(_parse(data))


def lane_from_capture(entries: list[dict[str, Any]]) -> tuple[Lane, bool]:
    """The lane recorded in a capture, and whether any stand-in started at all."""
    recorder = LaneRecorder()
    started = False
    for entry in entries:
        kind, instance, message = entry.get("k"), str(entry.get("i", "")), entry.get("m")
        if kind == START:
            started = True
        elif kind == CLIENT:
            recorder.client(
                message,
                instance=instance,
                mocked=bool(entry.get("mock")),
                at=stamp_of(entry),
                fault=_text(entry.get("fault")),
                fault_answer=entry.get("answer") if isinstance(entry.get("answer"), dict) else None,
                retry_of=_text(entry.get("retry_of")),
            )
        elif kind == SERVER:
            recorder.server(message, instance=instance)
    return recorder.lane, started


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def faults_applied(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Record: fault label -> attempts the stand-ins answered with it."""
    applied: dict[str, int] = {}
    for entry in entries:
        label = entry.get("fault") if entry.get("k") == CLIENT else None
        if isinstance(label, str):
            applied[label] = applied.get(label, 0) + 1
    return applied


def client_messages(entries: list[dict[str, Any]]) -> list[Any]:
    return [entry.get("m") for entry in entries if entry.get("k") == CLIENT]


def stamped_client_messages(entries: list[dict[str, Any]]) -> list[tuple[Any, float | None]]:
    """What the agent sent, each with when it arrived (None: a capture without stamps)."""
    return [(entry.get("m"), stamp_of(entry)) for entry in entries if entry.get("k") == CLIENT]


def stamp_of(entry: dict[str, Any]) -> float | None:
    stamp = entry.get("t")
    return float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else None


def started(entries: list[dict[str, Any]]) -> bool:
    """Whether any stand-in of the server started (the agent spawned it at all)."""
    return any(entry.get("k") == START for entry in entries)


def call_count(entries: list[dict[str, Any]]) -> int:
    """The calls the agent made: requests other than `ping` (kept out of lanes, like over
    HTTP)."""
    return sum(
        1
        for message in client_messages(entries)
        if isinstance(message, dict)
        and "method" in message
        and message.get("id") is not None
        and message["method"] != PING
    )


def unanswered(entries: list[dict[str, Any]]) -> list[str]:
    """Record: the agent's requests the server never answered (`call_text` of each), in
    order. A faulted attempt, a request the agent cancelled, a stream meant to stay open
    (`subscriptions/listen`), and every call of a stand-in that failed (its failure named
    them, and answered them) are not counted."""
    waiting: dict[tuple[str, str], str] = {}
    failed: set[str] = set()
    for entry in entries:
        kind, instance = entry.get("k"), str(entry.get("i", ""))
        message: Any = entry.get("m")
        if kind in (ERROR, REFUSED):
            failed.add(instance)
        elif entry.get("fault") is not None:
            continue  # answered by the fault (or, on purpose, never: a crash, a hang)
        elif kind == CLIENT and kind_of(message) is Kind.REQUEST and not entry.get("mock"):
            if message["method"] not in STREAMING_METHODS:
                label = call_label(message["method"], message.get("params"))
                waiting[(instance, id_key(message["id"]))] = call_text(label, message["id"])
        elif kind == CLIENT and isinstance(message, dict) and message.get("method") == CANCELLED:
            params = message.get("params")
            cancelled = params.get("requestId") if isinstance(params, dict) else None
            waiting.pop((instance, id_key(cancelled)), None)
        elif kind == SERVER and kind_of(message) is Kind.RESPONSE:
            waiting.pop((instance, id_key(message["id"])), None)
    return [call for (instance, _), call in waiting.items() if instance not in failed]
