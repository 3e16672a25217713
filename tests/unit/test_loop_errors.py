"""Errors logged outside mitmproxy's run: one line per kind, with a count, never a flood."""

from __future__ import annotations

import io
import logging

import pytest

from flowproof_cli.runner.loop_errors import MAX_KINDS, QuietLog, kind_of


def _record(message: str, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, (), exc_info)


@pytest.fixture
def quiet() -> tuple[QuietLog, io.StringIO]:
    stream = io.StringIO()
    return QuietLog(stream, configured=lambda: False), stream  # nothing else handles them


def test_ten_thousand_errors_of_one_kind_are_five_lines(quiet) -> None:
    handler, stream = quiet
    for number in range(10_000):  # each names another handle: still one kind
        message = f"Exception in callback <TimerHandle when={number} _start_serving()>"
        handler.emit(_record(message, ValueError("Invalid file descriptor: -1")))
    lines = stream.getvalue().splitlines()
    assert lines[0] == (
        "flowproof: asyncio: Exception in callback: ValueError (Invalid file descriptor: -1)"
    )
    assert lines[1:] == [
        f"flowproof: asyncio: Exception in callback: ValueError ({count} times so far)"
        for count in (10, 100, 1000, 10_000)
    ]
    assert "Traceback" not in stream.getvalue()


def test_kinds_beyond_the_limit_are_said_once(quiet) -> None:
    handler, stream = quiet
    for number in range(MAX_KINDS + 30):
        handler.emit(_record(f"error kind {number}"))
    lines = stream.getvalue().splitlines()
    assert len(lines) == MAX_KINDS + 1
    assert lines[-1] == f"flowproof: more kinds of error than {MAX_KINDS}, not shown"


def test_configured_logging_keeps_its_records() -> None:
    stream = io.StringIO()
    QuietLog(stream, configured=lambda: True).emit(_record("anything", RuntimeError("x")))
    assert stream.getvalue() == ""


def test_a_kind_leaves_out_what_names_one_object() -> None:
    first = kind_of(_record("Task exception was never retrieved at 0xabc", KeyError("k")))
    second = kind_of(_record("Task exception was never retrieved at 0xdef", KeyError("j")))
    assert first == second == "asyncio: Task exception was never retrieved: KeyError"
