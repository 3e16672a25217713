"""User code off the event loop: every call into a matcher script runs in a thread of its
own, within a time budget, and whatever it does becomes its flow's failure.

A matcher script is code flowproof does not control: its import, its `flowproof_normalize`
and the mitmproxy hooks of its addon objects. Called on the run's one event loop, a hook
that sleeps or loops stopped every flow, `--timeout`, SIGTERM and Ctrl-C with it, and a
`sys.exit(0)` ended the run with exit 0 and no verdict at all. Here:

* each script's calls run one at a time, in order (as under mitmproxy, which calls hooks on
  one thread), in a daemon thread of the script's own (`SerialThread`): daemon, and never
  asyncio's default executor, because `asyncio.run` joins that executor on its way out, so
  one stuck call would hang flowproof's exit;
* each call has a budget, counted from when it starts (`FLOWPROOF_ADDON_BUDGET`, default
  5 s: ample for a hook that rewrites one request, short enough that a stuck one is named
  long before a flow's default 300 s timeout; never more than the flow's timeout, so
  `--timeout` bounds the flow whatever its addons do): past it the caller gets `Overran`;
  the thread is left to the call (it cannot be stopped from outside) and every later call
  into that script fails at once (`Stuck`), naming the call that holds it;
* every `BaseException` the code raises (`SystemExit`, a `KeyboardInterrupt` it raises
  itself, `GeneratorExit`) is caught in that thread and handed back as `Raised`, an
  ordinary exception: a real Ctrl-C is only ever delivered to the main thread, so the two
  cannot be confused.

`ScriptCalls` words those outcomes as `MatcherAddonError`s naming the addon, the hook, what
it raised (with the script's line) or the budget it exceeded.

* `os._exit()` and the `os.exec*` calls, which would end or replace flowproof's process with
  no verdict printed (an `os._exit(0)` was a silent exit 0), raise `ProcessEnd` instead when
  user code calls them in its thread (`guard_process_ends`), and so fail its flow like a
  `SystemExit`.

What no thread can contain: a signal the code sends to its own process, the same calls made
through C (`ctypes`, `posix._exit`), and code that holds the interpreter lock in C for long
(a catastrophic `re` match), which stops every thread until it returns (docs/matching.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from flowproof_cli.errors import ConfigError, FlowproofError
from flowproof_cli.match.patterns import handed_to
from flowproof_cli.quoting import printable, quoted

#: The method that makes an addon object a match rule.
HOOK = "flowproof_normalize"
#: Seconds each call into a matcher script may take, its import included.
DEFAULT_BUDGET_S = 5.0
BUDGET_VARIABLE = "FLOWPROOF_ADDON_BUDGET"
_DETAIL_LIMIT = 200  # characters of an exception's text a message quotes


class MatcherAddonError(FlowproofError):
    """A matcher addon raised, exceeded its budget, or returned something not a request."""


@dataclass(frozen=True)
class Budget:
    """The seconds each call into a matcher script may take, and how to give it more."""

    seconds: float = DEFAULT_BUDGET_S
    more: str = f"set {BUDGET_VARIABLE} to the seconds it needs"


def addon_budget(environ: Mapping[str, str], timeout_s: float | None = None) -> Budget:
    """`FLOWPROOF_ADDON_BUDGET` (else 5 s), but never more than the flow's timeout: a flow
    waits on its addons' calls still running when its agent ended, and `--timeout` must
    bound the flow whatever they do. ConfigError naming the variable for a bad value."""
    value = environ.get(BUDGET_VARIABLE, "")
    try:
        seconds = float(value) if value.strip() else DEFAULT_BUDGET_S
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(
            f"{BUDGET_VARIABLE} is {value!r}: set it to the seconds each call into a matcher "
            f"addon may take (a number > 0, e.g. 10), or unset it for the default "
            f"{DEFAULT_BUDGET_S:g}"
        )
    if timeout_s is not None and timeout_s < seconds:
        return Budget(timeout_s, "give the flow a longer timeout (`timeout:` or `--timeout`)")
    return Budget(seconds)


# -- what a call can end in, besides returning -------------------------------------------------


class UserCodeFailure(Exception):
    """A call into code flowproof does not control did not return normally."""

    def __init__(self, label: str, detail: str) -> None:
        super().__init__(f"{label}: {detail}")
        self.label = label


class Raised(UserCodeFailure):
    """The call raised `original`, whatever it was (an ordinary exception carrying it);
    `text` is `exception_text(original)`, taken in the call's thread (its `__str__` is
    the user's code too)."""

    def __init__(self, label: str, original: BaseException, text: str) -> None:
        super().__init__(label, text)
        self.original = original
        self.text = text


class Overran(UserCodeFailure):
    """The call did not return within its budget; `frame` is where it was then."""

    def __init__(self, label: str, budget_s: float, frame: FrameType | None) -> None:
        super().__init__(label, f"still running after {budget_s:g} s")
        self.budget_s = budget_s
        self.frame = frame


class Stuck(UserCodeFailure):
    """The call never started: an earlier one (`holder`) overran and still holds the thread."""

    def __init__(self, label: str, holder: str, budget_s: float) -> None:
        super().__init__(label, f"not run: {holder} is still running past {budget_s:g} s")
        self.holder = holder
        self.budget_s = budget_s


def exception_text(exc: BaseException) -> str:
    """`SystemExit: 0`, `KeyboardInterrupt`, `KeyError: 'x'`: what was raised, as a message
    quotes outside text (one line, escaped, clipped); an exception whose own `__str__`
    fails is named by its type."""
    try:
        detail = " ".join(str(exc).split())
    except BaseException:  # a user's __str__ may raise anything
        detail = ""
    name = printable(type(exc).__name__)
    return f"{name}: {quoted(detail, _DETAIL_LIMIT)}" if detail else name


# -- no ending of flowproof's process from user code ---------------------------------------------

#: The calls that end or replace the process whoever calls them.
_PROCESS_ENDS = ("_exit", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp")
#: Per thread: the process id in which this thread is running user code (a fork of that
#: thread is another process, whose own `os._exit` must work).
_in_user_code = threading.local()
_guard_lock = threading.Lock()


class ProcessEnd(BaseException):
    """What `os._exit` or an `os.exec*` call raises in user code: the call, and that
    flowproof's process is not the script's to end."""


def _guarded(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def guard(*args: Any, **kwargs: Any) -> Any:
        if getattr(_in_user_code, "pid", None) == os.getpid():
            shown = ", ".join(repr(arg) for arg in args)
            raise ProcessEnd(
                f"os.{name}({shown}) was refused: a matcher script may not end flowproof's process"
            )
        return real(*args, **kwargs)

    guard.__wrapped__ = real  # type: ignore[attr-defined]
    return guard


def guard_process_ends() -> None:
    """Make `os._exit` and `os.exec*` raise `ProcessEnd` in threads running user code (once
    per process; elsewhere they do what they always did)."""
    with _guard_lock:
        for name in _PROCESS_ENDS:
            real = getattr(os, name, None)
            if real is not None and not hasattr(real, "__wrapped__"):
                setattr(os, name, _guarded(name, real))


# -- one thread, calls in order, each within the budget -----------------------------------------

_RETURNED, _RAISED, _FAILED = "returned", "raised", "failed"
_SETTLED = -1.0  # `_check`: the call has its outcome


@dataclass(eq=False)
class _Call:
    label: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    wake: Callable[[], None] | None  # an async waiter's: its state changed
    loop: asyncio.AbstractEventLoop | None = None  # the main thread's loop awaiting it
    started: float | None = None
    outcome: tuple[str, Any] | None = None

    def result(self) -> Any:
        assert self.outcome is not None
        kind, value = self.outcome
        if kind == _RETURNED:
            return value
        if kind == _RAISED:
            raise Raised(self.label, *value)
        raise value


class SerialThread:
    """Calls run in order, one at a time, in one daemon thread of this object's, each within
    `budget_s` seconds of its start (None: no limit). `call` waits from another thread
    (never the event loop's), `run` from the event loop; both return what the call returned
    or raise a `UserCodeFailure`."""

    def __init__(self, name: str = "user code", budget_s: float | None = DEFAULT_BUDGET_S):
        self.name = name
        self.budget_s = budget_s
        self._cond = threading.Condition()
        self._queue: deque[_Call] = deque()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._overran: _Call | None = None  # the call past its budget: it keeps the thread

    def call(self, label: str, fn: Callable[..., Any], *args: Any) -> Any:
        job = self._submit(_Call(label, fn, args, None))
        with self._cond:
            while (wait := self._check(job)) != _SETTLED:
                self._cond.wait(wait)
        return job.result()

    async def run(self, label: str, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def wake() -> None:  # from the worker: the loop may be gone if the run ended
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(changed.set)

        on_main = threading.current_thread() is threading.main_thread()
        job = self._submit(_Call(label, fn, args, wake, loop if on_main else None))
        while True:
            changed.clear()
            with self._cond:
                wait = self._check(job)
            if wait == _SETTLED:
                return job.result()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), wait)

    def close(self) -> None:
        """The thread ends once its queued calls are done (a later call starts a new one);
        one held by an overrun call is left to it."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def _submit(self, job: _Call) -> _Call:
        with self._cond:
            if self._overran is not None:
                holder = self._overran.label
                job.outcome = (_FAILED, Stuck(job.label, holder, self.budget_s or 0.0))
                return job
            self._closing = False
            self._queue.append(job)
            if self._thread is None:
                guard_process_ends()
                self._thread = threading.Thread(
                    target=self._work, name=f"flowproof {self.name}", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        return job

    def _check(self, job: _Call) -> float | None:
        """Under the lock: _SETTLED, or how long to wait (None: until woken)."""
        if job.outcome is not None:
            return _SETTLED
        if job.started is None or self.budget_s is None:
            return None
        left = job.started + self.budget_s - time.monotonic()
        if left > 0:
            return left
        thread = self._thread
        frame = sys._current_frames().get(thread.ident) if thread and thread.ident else None
        job.outcome = (_FAILED, Overran(job.label, self.budget_s, frame))
        self._overran = job
        for queued in self._queue:  # they will never run: each fails as Stuck
            queued.outcome = (_FAILED, Stuck(queued.label, job.label, self.budget_s))
            if queued.wake is not None:
                queued.wake()
        self._queue.clear()
        self._cond.notify_all()
        return _SETTLED

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    if self._closing or self._overran is not None:
                        if self._overran is None:
                            self._thread = None
                        return
                    self._cond.wait()
                job = self._queue.popleft()
                job.started = time.monotonic()
                self._cond.notify_all()
            if job.wake is not None:
                job.wake()
            self._run_one(job)

    def _run_one(self, job: _Call) -> None:
        _in_user_code.pid = os.getpid()
        try:
            with handed_to(job.loop):  # its declared patterns run on that loop, budgeted
                outcome: tuple[str, Any] = (_RETURNED, job.fn(*job.args))
        except BaseException as exc:  # SystemExit, ProcessEnd and all: the outcome
            outcome = (_RAISED, (exc, exception_text(exc)))
        finally:
            _in_user_code.pid = None
        with self._cond:
            if job.outcome is None:  # not already declared past its budget
                job.outcome = outcome
            self._cond.notify_all()
        if job.wake is not None:
            job.wake()


# -- a matcher script's calls, worded for its flow -----------------------------------------------


class ScriptCalls:
    """Every call into one matcher script (its import, each hook of each of its addon
    objects) in the script's own `SerialThread`; a failed call is a `MatcherAddonError`
    naming the addon, the hook and what happened, with the script's line where known."""

    def __init__(self, path: Path | None, budget: Budget | None = None) -> None:
        self.path = path
        self.budget = budget or Budget()
        self.thread = SerialThread(path.name if path else "matcher addon", self.budget.seconds)

    def call(self, addon: str, hook: str, fn: Callable[..., Any], *args: Any) -> Any:
        """From a thread other than the event loop's (the rules thread, a flow's setup)."""
        try:
            return self.thread.call(f"{addon}.{hook}", fn, *args)
        except UserCodeFailure as failure:
            raise self.worded(failure, addon, hook) from None

    async def run(self, addon: str, hook: str, fn: Callable[..., Any], *args: Any) -> Any:
        """From the event loop, which goes on while the call runs."""
        try:
            return await self.thread.run(f"{addon}.{hook}", fn, *args)
        except UserCodeFailure as failure:
            raise self.worded(failure, addon, hook) from None

    def close(self) -> None:
        self.thread.close()

    def worded(self, failure: UserCodeFailure, addon: str, hook: str) -> MatcherAddonError:
        """The flow's failure: the addon, the hook, what it raised or the budget it went
        past (with the script's line), or the earlier call that still holds its thread."""
        if isinstance(failure, Raised):
            at = self.line_of(traceback.walk_tb(failure.original.__traceback__))
            return MatcherAddonError(
                f"the matcher addon {addon} raised {failure.text} in {hook}{at}"
            )
        if isinstance(failure, Overran):
            frames = reversed(list(traceback.walk_stack(failure.frame))) if failure.frame else []
            return MatcherAddonError(
                f"the matcher addon {addon} did not return from {hook} within its budget of "
                f"{failure.budget_s:g} s{self.line_of(frames, 'still at ')}. Fix: make {hook} "
                f"return sooner, or {self.budget.more}"
            )
        assert isinstance(failure, Stuck)
        return MatcherAddonError(
            f"the matcher addon {addon} could not run {hook}: its script is still in "
            f"{failure.holder}, past its budget of {failure.budget_s:g} s"
        )

    def line_of(self, frames: Iterable[tuple[FrameType, int]], lead: str = "") -> str:
        """` (strip_session.py:21)`: the innermost of `frames` (outermost first) that runs
        the script's own code, or nothing. Read from the frames, no file is opened."""
        if self.path is None:
            return ""
        script = str(self.path)
        lines = [line for frame, line in frames if frame.f_code.co_filename == script]
        return f" ({lead}{self.path.name}:{lines[-1]})" if lines else ""
