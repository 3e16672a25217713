"""Running many flows, N at a time, and reporting their results in the order given.

mitmproxy allows one master per process, so flows cannot share this process's event loop
in parallel. With `-j N` (N > 1) each flow runs in its own worker process
(`python -m flowproof_cli run SPEC --worker`, the job as JSON on stdin, the result as JSON on
stdout), each with its own proxy and ports, at most N at once. With `-j 1` the flows run here,
one after the other. Both go through `job.execute`, so their results are the same.

When flowproof is interrupted or terminated, the workers are sent SIGTERM (each then stops
its agent, closes its proxy and runs `after_each`) and waited for: none outlives flowproof.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from flowproof_cli.runner.command import tail_lines
from flowproof_cli.runner.job import FlowJob, error_row, execute
from flowproof_cli.runner.termination import raising_on_sigterm
from flowproof_cli.verdict import FlowResult

OnResult = Callable[[FlowResult], None]


def run_jobs(
    jobs: Sequence[FlowJob], workers: int = 1, on_result: OnResult | None = None
) -> list[FlowResult]:
    """Each job's result, in the order of `jobs`; `on_result` sees each one as soon as it and
    all those before it are done (so output streams in a stable order)."""
    results: list[FlowResult] = []
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            results.append(execute(job))
            if on_result is not None:
                on_result(results[-1])
        return results
    pool = WorkerPool()
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="flowproof-worker")
    try:
        with raising_on_sigterm():
            futures: list[Future[FlowResult]] = [executor.submit(pool.run, job) for job in jobs]
            for future in futures:
                results.append(future.result())
                if on_result is not None:
                    on_result(results[-1])
    except BaseException:
        pool.stop()
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    return results


def worker_command(job: FlowJob) -> list[str]:
    return [sys.executable, "-m", "flowproof_cli", "run", str(job.spec_path), "--worker"]


class WorkerPool:
    """The live worker processes, so that stopping flowproof can stop them too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen[str]] = set()
        self._stopping = False

    def run(self, job: FlowJob) -> FlowResult:
        """Run one job in a child process and read its result back."""
        with self._lock:
            if self._stopping:
                return error_row(job, "not run: flowproof was stopped")
            process = subprocess.Popen(
                worker_command(job),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            )
            self._live.add(process)
        try:
            stdout, stderr = process.communicate(json.dumps(job.to_json()))
        finally:
            with self._lock:
                self._live.discard(process)
        return _read_result(job, process.returncode, stdout, stderr)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            for process in self._live:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)


def _read_result(job: FlowJob, code: int, stdout: str, stderr: str) -> FlowResult:
    try:
        return FlowResult.from_json(json.loads(stdout))
    except (ValueError, KeyError, TypeError):
        tail = tail_lines(stderr)
        return error_row(
            job,
            f"the worker process for this flow exited with code {code} without a result"
            + (f"; its stderr ends with:\n{tail}" if tail else ""),
        )
