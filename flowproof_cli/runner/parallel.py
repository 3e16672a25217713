"""Running many flows in one event loop, N at a time, reporting results in the order given.

One process, one event loop, one proxy (`run_proxy.RunProxy`, started when the first flow
needs it): each flow listens on ports of its own and its agent is a child process driven
from this loop, so `-j N` costs no re-import and no second proxy. `-j 1` is the same path
with one flow at a time, so both give the same verdicts.

Ctrl-C cancels the run's main task, SIGTERM every flow (`runner.termination`); either way
every running flow ends its agent, closes its listeners and runs `after_each` before the
proxy stops and flowproof exits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from flowproof_cli.errors import Terminated
from flowproof_cli.mode import Mode
from flowproof_cli.runner import orphans
from flowproof_cli.runner.job import FlowJob, LazyHub, execute_async
from flowproof_cli.runner.termination import stopping_once_on_ctrl_c
from flowproof_cli.verdict import FlowResult

OnResult = Callable[[FlowResult], None]


def run_jobs(
    jobs: Sequence[FlowJob],
    workers: int = 1,
    on_result: OnResult | None = None,
    addons: Sequence[Any] = (),
) -> list[FlowResult]:
    """Each job's result, in the order of `jobs`; `on_result` sees each one as soon as it and
    all those before it are done (so output streams in a stable order)."""
    run = _run_all(jobs, max(1, workers), on_result, addons)
    return asyncio.run(stopping_once_on_ctrl_c(run))  # a second Ctrl-C cannot cut cleanup


def execute(job: FlowJob, addons: Sequence[Any] = ()) -> FlowResult:
    """Run one job to its result (a single-spec command): a run of one.
    Single-spec jobs raise FlowproofError; directory jobs don't."""
    (result,) = run_jobs([job], addons=addons)
    return result


class _InOrder:
    """Results as they finish, handed on in the jobs' order."""

    def __init__(self, count: int, on_result: OnResult | None):
        self.results: list[FlowResult | None] = [None] * count
        self._on_result = on_result
        self._next = 0

    def done(self, index: int, result: FlowResult) -> None:
        self.results[index] = result
        while self._next < len(self.results):
            ready = self.results[self._next]
            if ready is None:
                return
            if self._on_result is not None:
                self._on_result(ready)
            self._next += 1


async def _run_all(
    jobs: Sequence[FlowJob], workers: int, on_result: OnResult | None, addons: Sequence[Any]
) -> list[FlowResult]:
    adopted_before = orphans.children()
    ordered = _InOrder(len(jobs), on_result)
    gate = asyncio.Semaphore(workers)
    hub = LazyHub(addons, upstream_tls=any(job.mode is Mode.RECORD for job in jobs))

    terminated = False

    async def one(index: int, job: FlowJob) -> None:
        nonlocal terminated
        try:
            async with gate:
                result = await execute_async(job, hub)
        except Terminated:  # SIGTERM: every flow is stopping; re-raised once all have
            terminated = True
            return
        ordered.done(index, result)

    try:
        async with asyncio.TaskGroup() as group:  # one flow's error ends them all
            for index, job in enumerate(jobs):
                group.create_task(one(index, job))
    except BaseExceptionGroup as group_error:
        raise group_error.exceptions[0] from None  # a single-spec job's FlowproofError
    finally:
        await hub.stop()
        await asyncio.to_thread(orphans.sweep, adopted_before)
    if terminated:  # raised by the main task, where asyncio.run hands it to the caller
        raise Terminated
    return [result for result in ordered.results if result is not None]
