"""SIGTERM ends a flow the way Ctrl-C does: by cancelling it, so every `finally` runs.

`asyncio.run` already turns SIGINT into a cancellation of its main task. SIGTERM (what CI
runners, `timeout` and `docker stop` send) would by default kill flowproof on the spot: no
`finally` would run, and the agent, which lives in its own session, would survive with its
children while the proxy's port went with flowproof. Here SIGTERM cancels every running
flow instead; once their cleanup is done (agent group killed, proxy closed), `Terminated`
(a SystemExit with `ExitCode.TERMINATED`, 128 + 15) ends flowproof past every handler of flow
errors, so a directory run does not go on to the next flow.

Ctrl-C is asyncio's to turn into a cancellation, but asyncio raises KeyboardInterrupt at the
second one wherever the loop happens to be: mid-cleanup, leaving the agent running and the
loop's tasks pending. `stopping_once_on_ctrl_c` takes that over for a run: the first Ctrl-C
cancels it, later ones wait for the cleanup (bounded: SIGTERM, a grace period, SIGKILL).

Signal handlers can only be set from the main thread; a flow run in another thread is left
to its caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Awaitable, Iterator

from flowproof_cli.errors import EarlyInterrupt, Terminated


class _LoopFlows:
    """The flows of one event loop that a SIGTERM cancels."""

    terminated = False  # set for the whole process: no flow starts after a SIGTERM

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[object]] = set()

    def on_sigterm(self) -> None:
        if _LoopFlows.terminated:
            return  # already stopping: a second signal must not interrupt the cleanup
        _LoopFlows.terminated = True
        for task in self.tasks:  # first: nothing below may keep the flows from stopping
            task.cancel()
        say("flowproof: SIGTERM received: stopping the agent and the proxy")


def say(notice: str) -> None:
    """A notice on stderr that never fails: a closed or full pipe (a CI runner that stopped
    reading) must not turn a stop into an error, or swallow it."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(notice + "\n")
        sys.stderr.flush()


_BY_LOOP: dict[asyncio.AbstractEventLoop, _LoopFlows] = {}


@contextlib.contextmanager
def cancelled_by_sigterm() -> Iterator[None]:
    """Within this block (inside a task), SIGTERM cancels the task, then raises Terminated."""
    if _LoopFlows.terminated:
        raise Terminated
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    flows = _BY_LOOP.get(loop)
    if flows is None and task is not None:
        flows = _LoopFlows()
        try:
            loop.add_signal_handler(signal.SIGTERM, flows.on_sigterm)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
            flows = None
        else:
            _BY_LOOP[loop] = flows
    if flows is None or task is None or task in flows.tasks:  # nested: the outer block owns it
        yield
        return
    flows.tasks.add(task)
    try:
        yield
    except asyncio.CancelledError:
        if _LoopFlows.terminated:
            raise Terminated from None
        raise
    finally:
        flows.tasks.discard(task)
        if not flows.tasks:
            del _BY_LOOP[loop]
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signal.SIGTERM)


@contextlib.contextmanager
def raising_on_sigterm() -> Iterator[None]:
    """While blocked on child processes, turn SIGTERM into `Terminated` (like Ctrl-C into
    KeyboardInterrupt), so the caller can stop its children and run its `finally` blocks
    instead of dying on the spot. Only the main thread can handle signals; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def stopping_once_on_ctrl_c[T](run: Awaitable[T]) -> T:
    """Await a run (the main task of `asyncio.run`) that Ctrl-C stops exactly once: the first
    cancels it, so every flow's cleanup runs; a later one only says that flowproof is still
    stopping. Ends in KeyboardInterrupt, as under asyncio's own handler. An ignored SIGINT (a
    background job) stays ignored."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if EarlyInterrupt.pressed:  # a Ctrl-C Python lost on the way here: nothing has started
        close = getattr(run, "close", None)
        if close is not None:
            close()  # the run's coroutine, never started, goes without a warning
        raise KeyboardInterrupt
    if task is None or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return await run
    pressed = 0

    def on_sigint() -> None:
        nonlocal pressed
        pressed += 1
        if pressed == 1:
            task.cancel()
        elif pressed == 2:
            say("flowproof: still stopping the agent and the proxy")

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
        return await run
    try:
        return await run
    except asyncio.CancelledError:
        if pressed:
            raise KeyboardInterrupt from None
        raise
    finally:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGINT)
