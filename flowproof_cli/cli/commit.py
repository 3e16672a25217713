"""The end of `flowproof record`: the trace replaced, its `wrote` line and the verdict
printed, as one step that no signal splits.

The flow stages its recording beside the trace (runner/rerecord.py); nothing replaces the
trace before this step. Until the step begins, SIGINT and SIGTERM stop the record as they
do anywhere (`interrupted`, exit 130; exit 143), the staged recording is removed and the
old trace stays. From its first line to the process's exit, both signals are only noted:

* one noted before the trace is replaced still stops the record there, exactly as before
  the step (the old trace stays, the exit says interrupted or terminated);
* once the rename is done, the record completes: the `wrote` line and the verdict are
  printed, a line on stderr says the signal came too late to stop it, and the exit code
  is the verdict's. The output and the exit code always describe the trace on disk.

`FLOWPROOF_COMMIT_PROBE=DIR` (for flowproof's own tests) stops the step at each moment a
signal could land, until the test removes `DIR/<moment>`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType

import click

from flowproof_cli.cli.output import print_results
from flowproof_cli.errors import Terminated
from flowproof_cli.runner.rerecord import commit, discard
from flowproof_cli.runner.termination import say
from flowproof_cli.verdict import FlowResult

PROBE_VARIABLE = "FLOWPROOF_COMMIT_PROBE"
_PROBE_WAIT_S = 60.0
_STOPPING = (signal.SIGINT, signal.SIGTERM)


class _Noted:
    """A signal handler that only notes the signals it gets."""

    def __init__(self) -> None:
        self.signals: list[signal.Signals] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signal.Signals(signum))


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM raises Terminated (as Ctrl-C raises KeyboardInterrupt) until the step: the
    event loop that handled it is gone by now, and its default would kill flowproof on the
    spot, with no word and nothing removed."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    yield


def _noting_from_now() -> _Noted:
    """From here to the exit, SIGINT and SIGTERM are only noted (an ignored one stays
    ignored). A handler runs in the main thread between two bytecodes, whichever thread
    the kernel picked, so noting cannot split the step."""
    noted = _Noted()
    if threading.current_thread() is threading.main_thread():
        for sig in _STOPPING:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, noted)
    return noted


def probe(moment: str) -> None:
    """Under flowproof's tests only: wait at `moment` until the test removes its file."""
    folder = os.environ.get(PROBE_VARIABLE)
    if not folder:
        return
    marker = Path(folder) / moment
    marker.touch()
    deadline = time.monotonic() + _PROBE_WAIT_S
    while marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def finish_record(
    results: Sequence[FlowResult], *, review: Callable[[], None], as_json: bool, fs_report: str
) -> int:
    """Review the candidates (`review`), then commit and print as one step; the exit code."""
    try:
        with _stopped_by_sigterm():
            review()
            probe("review")
        noted = _noting_from_now()
        probe("noting")
        if noted.signals:  # before the trace is replaced: the record stops here
            raise KeyboardInterrupt if noted.signals[0] is signal.SIGINT else Terminated
        commit(results)
        probe("replaced")
        code = print_results(list(results), as_json=as_json, summary=False, fs_report=fs_report)
        _flush()
        probe("printed")
    except (KeyboardInterrupt, Terminated, click.exceptions.Abort) as stop:
        _say_discarded(results, stop)
        raise
    finally:
        discard(results)
    for sig in dict.fromkeys(noted.signals):
        say(
            f"flowproof: {sig.name} arrived once the record was complete: the output above "
            "stands, and the exit code is its verdict's"
        )
    return code


def _say_discarded(results: Sequence[FlowResult], stop: BaseException) -> None:
    if isinstance(stop, Terminated):
        say("flowproof: SIGTERM received: stopping")
    for result in results:
        if result.staged_trace is None:
            continue
        if result.trace_path.exists():
            say(
                f"flowproof: {result.trace_path} was left as it was (the new recording was "
                "not moved over it)"
            )
        else:
            say(f"flowproof: no trace was written at {result.trace_path}")


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing left to say
            stream.flush()
