"""Patterns from specs, suites and presets run with a budget of CPU time.

A regex with nested repetition (`(a+)+$`) backtracks for years on a 41-character text, and
Python's `re` does it on the event loop: no other flow, no `--timeout`, no SIGTERM and no
Ctrl-C could act until it returned. So every application of a declared pattern (one
normalize rule over one request, one `matches` clause against one argument) runs under a
budget; past it the pattern is stopped and the flow fails, naming the pattern, where it was
declared and the budget.

The engine stays Python's `re`, so a pattern means exactly what Python documents. The
budget is the process's CPU timer (`ITIMER_VIRTUAL`): when it runs out, its signal's
handler raises inside `re`, which checks for signals while it matches. Arming it costs two
system calls per application, nothing per string. Why not the `regex` library's timeout or
a linear-time engine: docs/matching.md, with the figures.

Signals reach Python code on the main thread only, which is where the CLI, the pytest
plugin and stock mitmdump run flows. A flow with matcher addons applies its rules in a
thread of its own (match/user_code.py); each pattern application there is handed back to
the event loop awaiting that thread (`handed_to`), which runs it on the main thread under the
budget while the thread waits: `re` holds the interpreter lock, so an unbudgeted match in
any thread would hold every thread, the loop and its signals with them. On a thread no loop
awaits (the Python API called from one) nothing can stop `re`, and a pattern runs without a
budget.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import re
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from flowproof_cli.errors import FlowproofError

#: CPU seconds one application may take. Over 1 MB of text the presets' patterns take at
#: most about 50 ms (docs/matching.md, with the two that do not on text made to defeat
#: them), so ordinary patterns stay an order of magnitude below it; and a stuck pattern
#: holds the other flows, a signal and `--timeout` at most this long. CPU time, not wall
#: time, so a loaded machine does not fail a flow.
BUDGET_S = 1.0

_SHOWN = 80  # characters of a pattern a message quotes


class PatternTimeout(Exception):
    """Raised inside a pattern application by the timer: its budget ran out."""


class PatternBudgetExceeded(FlowproofError):
    """A declared pattern ran past its budget (a verdict: the flow fails with the message)."""

    def __init__(
        self, kind: str, pattern: str, declared: str, subject: str, budget_s: float
    ) -> None:
        self.kind = kind
        self.pattern = pattern
        self.declared = declared
        self.subject = subject
        self.budget_s = budget_s
        shown = pattern if len(pattern) <= _SHOWN else pattern[: _SHOWN - 3] + "..."
        super().__init__(
            f"the {kind} `{shown}` ({declared}) ran past its budget of {budget_s:g} s of CPU "
            f"time on {subject} and was stopped. Fix: rewrite it so that no part of it can "
            "match the same text in more than one way (nested repetition such as `(a+)+` or "
            "`(a|a)*` backtracks without end; `a+` alone does not), or narrow the text it "
            "runs on (a normalize rule's `at:`)"
        )

    def restated(
        self, *, declared: str | None = None, subject: str | None = None
    ) -> PatternBudgetExceeded:
        """The same finding, told where the pattern was declared or what it ran on by a
        caller that knows it better."""
        return PatternBudgetExceeded(
            self.kind,
            self.pattern,
            self.declared if declared is None else declared,
            self.subject if subject is None else subject,
            self.budget_s,
        )


class BadPattern(Exception):
    """A pattern Python's `re` refuses; the message says why (a loader adds where)."""


def compile_pattern(text: str) -> re.Pattern[str]:
    """`re.compile`, with every way it can refuse a pattern as BadPattern: a syntax error,
    a repeat count too large, groups nested too deeply for its recursive parser."""
    try:
        with warnings.catch_warnings():  # `[[` is only a FutureWarning: not the user's output
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(text)
    except (re.error, OverflowError) as exc:
        raise BadPattern(str(exc)) from None
    except RecursionError:
        raise BadPattern("its groups are nested too deeply for Python's `re`") from None


class _Timer:
    """The process's CPU timer, armed around one application on the main thread."""

    armed = False
    handler: Any = None  # flowproof's SIGVTALRM handler, as installed
    previous: Any = None  # the handler before it, for ticks not ours

    @classmethod
    def on_tick(cls, signum: int, frame: FrameType | None) -> None:
        if cls.armed:
            cls.armed = False
            raise PatternTimeout
        if callable(cls.previous):  # another user of the timer, or a tick after disarming
            cls.previous(signum, frame)

    @classmethod
    def usable(cls) -> bool:
        """On the main thread, with flowproof's handler in place (again, if something
        replaced it since: that handler is then the one ticks not ours go to)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        if signal.getsignal(signal.SIGVTALRM) is not cls.handler or cls.handler is None:
            handler = cls.on_tick
            try:
                cls.previous = signal.signal(signal.SIGVTALRM, handler)
            except (ValueError, OSError, AttributeError):  # not the main interpreter; no timer
                return False
            cls.handler = handler
        return True


class _NoLoop:
    """`_on_main_thread`'s answer when no loop awaits this thread."""


NO_LOOP = _NoLoop()


_handoff = threading.local()  # .loop: the main thread's event loop awaiting this thread


@contextlib.contextmanager
def handed_to(loop: asyncio.AbstractEventLoop | None) -> Iterator[None]:
    """In a worker thread whose call `loop` (running on the main thread) awaits: pattern
    applications in it run on that loop, under the budget, while the worker waits."""
    previous = getattr(_handoff, "loop", None)
    _handoff.loop = loop
    try:
        yield
    finally:
        _handoff.loop = previous


def _on_main_thread[T](call: Callable[[], T]) -> T | _NoLoop:
    """`call()` run on the loop this thread was handed to, or NO_LOOP when there is none."""
    loop: asyncio.AbstractEventLoop | None = getattr(_handoff, "loop", None)
    if loop is None or loop.is_closed():
        return NO_LOOP
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if done.set_running_or_notify_cancel():
            try:
                done.set_result(call())
            except Exception as exc:  # PatternBudgetExceeded and all: the caller's
                done.set_exception(exc)
            except BaseException as exc:  # an interrupt is the main thread's; the caller stops
                done.set_exception(exc)
                raise

    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError:  # the loop closed meanwhile
        return NO_LOOP
    return done.result()


def within_budget[T](
    call: Callable[[], T],
    *,
    kind: str,
    pattern: str,
    declared: str,
    subject: str,
    budget_s: float | None = None,
) -> T:
    """`call()` (one application of `pattern`), stopped after `budget_s` of CPU time.

    Raises PatternBudgetExceeded naming the `kind` of pattern, the pattern, `declared`
    (where it was declared) and `subject` (what it ran on). Nested calls run under the
    outer budget. `budget_s` defaults to BUDGET_S. Off the main thread, the application is
    handed to the loop awaiting this thread (`handed_to`), when there is one."""
    if threading.current_thread() is not threading.main_thread():
        budgeted = functools.partial(
            within_budget,
            call,
            kind=kind,
            pattern=pattern,
            declared=declared,
            subject=subject,
            budget_s=budget_s,
        )
        handed = _on_main_thread(budgeted)
        return call() if isinstance(handed, _NoLoop) else handed
    if _Timer.armed or not _Timer.usable():
        return call()
    budget_s = BUDGET_S if budget_s is None else budget_s
    _Timer.armed = True
    before = signal.setitimer(signal.ITIMER_VIRTUAL, budget_s)
    try:
        try:
            return call()
        finally:
            _Timer.armed = False  # first: a tick from here on is not a timeout
            signal.setitimer(signal.ITIMER_VIRTUAL, *before)  # someone else's timer, if any
    except PatternTimeout:  # also when the tick came just as `call` returned
        raise PatternBudgetExceeded(kind, pattern, declared, subject, budget_s) from None
