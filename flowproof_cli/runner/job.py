"""One flow as a unit of work: its suite environment and hooks, skip rules, then `run_flow`.

A FlowJob is plain data (JSON both ways, for the run record). Every flow of a run goes
through `execute_async` in the run's one event loop, on the run's one proxy, whether the
flows run one at a time (`-j 1`) or N at once (`-j N`): both give the same results.

Two semantics, chosen by `in_directory`:

* single spec (`run SPEC`, `record SPEC`): flowproof errors propagate (exit 2, on stderr),
  and a missing trace is such an error;
* directory run: every problem of one flow becomes that flow's row (an error row for a bad
  spec), and a flow without a trace is skipped, naming the record command.
"""

from __future__ import annotations

import asyncio
import errno
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowproof_cli.errors import ConfigError, FlowproofError, TraceError
from flowproof_cli.evidence.records import file_sha256, with_evidence
from flowproof_cli.faults.plan import Fault, faults_from_document, faults_to_document
from flowproof_cli.match.build import Declared
from flowproof_cli.mode import Mode
from flowproof_cli.runner.discovery import nearest_suite
from flowproof_cli.runner.suite import Hooks, Suite, prepare_suite, run_hook
from flowproof_cli.runner.termination import cancelled_by_sigterm
from flowproof_cli.spec import FlowSpec, load_spec
from flowproof_cli.trace import trace_path_for
from flowproof_cli.verdict import FlowResult

if TYPE_CHECKING:
    from flowproof_cli.runner.run_proxy import RunProxy


@dataclass(frozen=True)
class FlowJob:
    spec_path: Path
    trace_path: Path
    mode: Mode
    environ: dict[str, str]
    hooks: Hooks
    timeout_s: float | None = None
    in_directory: bool = False
    suite_match: tuple[Declared, ...] = ()  # the nearest suite's `match:` block
    keep_going: bool = False  # after a divergence, the agent runs to its own end
    #: Faults on top of the spec's, at replay only (`flowproof chaos`): not in the trace.
    injected: tuple[Fault, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "spec_path": str(self.spec_path),
            "trace_path": str(self.trace_path),
            "mode": self.mode.value,
            "environ": self.environ,
            "hooks": self.hooks.to_json(),
            "timeout_s": self.timeout_s,
            "in_directory": self.in_directory,
            "suite_match": [block.to_json() for block in self.suite_match],
            "keep_going": self.keep_going,
            "injected": faults_to_document(self.injected),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FlowJob:
        return cls(
            spec_path=Path(data["spec_path"]),
            trace_path=Path(data["trace_path"]),
            mode=Mode(data["mode"]),
            environ=dict(data["environ"]),
            hooks=Hooks.from_json(data["hooks"]),
            timeout_s=data.get("timeout_s"),
            in_directory=bool(data.get("in_directory")),
            suite_match=tuple(Declared.from_json(block) for block in data.get("suite_match") or ()),
            keep_going=bool(data.get("keep_going")),
            injected=_injected(data.get("injected") or []),
        )


def _injected(document: Any) -> tuple[Fault, ...]:
    """A job's injected faults read back; a document flowproof did not write is refused."""
    faults = faults_from_document(document)
    if isinstance(faults, str):
        raise ValueError(f"the job's injected faults: {faults}")
    return faults


def plan_jobs(
    spec_paths: Sequence[Path],
    *,
    mode: Mode,
    environ: Mapping[str, str],
    timeout_s: float | None = None,
    trace_path: Path | None = None,
    in_directory: bool = False,
    keep_going: bool = False,
) -> list[FlowJob]:
    """A job per spec, each with the suite nearest above it.

    Every suite is prepared once, before any flow runs: a broken suite (bad `suite.yaml`,
    failing `env_from`) stops the whole run here with its error (exit 2).
    """
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigError(
            f"the timeout {timeout_s!r} is not a number of seconds > 0. Fix: give a finite "
            "number of seconds, e.g. 300, or none for the spec's own"
        )
    suites: dict[Path | None, Suite] = {}
    jobs: list[FlowJob] = []
    for spec_path in spec_paths:
        suite_path = nearest_suite(spec_path)
        if suite_path not in suites:
            suites[suite_path] = prepare_suite(suite_path, environ)
        suite = suites[suite_path]
        jobs.append(
            FlowJob(
                spec_path=spec_path,
                trace_path=trace_path or trace_path_for(spec_path),
                mode=mode,
                environ=suite.environ,
                hooks=suite.hooks,
                timeout_s=timeout_s,
                in_directory=in_directory,
                suite_match=suite.match,
                keep_going=keep_going,
            )
        )
    return jobs


class LazyHub:
    """The run's proxy, imported and started only when a flow first needs it: a run whose
    flows are all skipped never loads mitmproxy."""

    def __init__(self, addons: Sequence[Any] = (), *, upstream_tls: bool = True) -> None:
        self._hub: RunProxy | None = None
        self._addons = addons  # joined after the boundaries (`run --inspect`)
        self._upstream_tls = upstream_tls  # a run that only replays dials nothing

    def get(self) -> RunProxy:
        """The hub, its start begun in the background: it overlaps the flow's own setup
        (trace, match rules, hooks), and the flow's first listener waits for it."""
        if self._hub is None:
            from flowproof_cli.runner.run_proxy import RunProxy  # noqa: PLC0415

            self._hub = RunProxy(self._addons, upstream_tls=self._upstream_tls)
            starting = asyncio.ensure_future(self._hub.start())
            # A failed start is raised again by the listener that needs it; not logged here.
            starting.add_done_callback(lambda task: task.cancelled() or task.exception())
        return self._hub

    async def stop(self) -> None:
        if self._hub is not None:
            await self._hub.stop()


async def execute_async(job: FlowJob, hub: LazyHub) -> FlowResult:
    """Run one job to its result in the run's event loop, on the run's proxy."""
    with cancelled_by_sigterm():  # hooks included: SIGTERM stops them too
        try:
            return await _execute(job, hub)
        except FlowproofError as exc:
            if not job.in_directory:
                raise
            return error_row(job, str(exc))


def error_row(job: FlowJob, message: str, name: str | None = None) -> FlowResult:
    result = FlowResult(name or job.spec_path.name, job.spec_path, job.mode.value, job.trace_path)
    result.error = message
    return result


def skip_reason(spec: FlowSpec, job: FlowJob) -> str | None:
    """Why this flow does not run at all, or None. An empty variable counts as unset (CI
    systems set a missing secret to the empty string). A trace path that is a broken link
    is an error, not a missing trace."""
    missing = [name for name in spec.skip_unless_env if not job.environ.get(name)]
    if missing:
        return f"not set: {', '.join(missing)} (skip_unless_env)"
    if job.mode is Mode.REPLAY and not job.trace_path.exists():
        command = f"flowproof record {job.spec_path}"
        link = _broken_link(job.trace_path)
        if link:  # something is there, broken: that flow's error, in a directory run too
            raise TraceError(
                f"no trace at {job.trace_path}: it is {link}. Fix: remove it, then record: "
                f"{command}"
            )
        if not job.in_directory:
            raise TraceError(f"no trace at {job.trace_path}; record it first: {command}")
        return f"no trace; record it: {command}"
    return None


def _broken_link(path: Path) -> str:
    """What a trace path that exists as a name but leads to no file is, in words ('' when
    there is nothing at the path at all)."""
    if not os.path.islink(path):
        return ""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
    return f"a symbolic link to {os.readlink(path)}, which does not exist"


async def _execute(job: FlowJob, hub: LazyHub) -> FlowResult:
    spec_sha256 = file_sha256(job.spec_path)  # the spec as this job loads it
    spec = load_spec(job.spec_path)
    result = FlowResult(spec.name, job.spec_path, job.mode.value, job.trace_path)
    result.skipped = skip_reason(spec, job)
    if result.skipped is not None:
        return with_evidence(result, spec, spec_sha256)
    # Imported here: a run whose flows are all skipped never loads the proxy engine.
    from flowproof_cli.runner.flow import run_flow  # noqa: PLC0415

    started = time.monotonic()
    error: FlowproofError | None = None
    proxy = hub.get()
    try:
        setup = await run_hook(job.hooks, "before_each", job.spec_path, job.environ)
        if setup is not None:
            result.error = setup
        else:
            result = await run_flow(
                spec,
                mode=job.mode,
                trace_path=job.trace_path,
                environ=job.environ,
                timeout_s=job.timeout_s,
                suite_match=job.suite_match,
                hub=proxy,
                keep_going=job.keep_going,
                injected=job.injected,
            )
    except FlowproofError as exc:
        error = exc
    finally:  # after_each always runs: after a failure, an error, even an interrupt
        teardown = await run_hook(job.hooks, "after_each", job.spec_path, job.environ)
    if error is not None:
        if not job.in_directory:
            raise error if teardown is None else FlowproofError(f"{error}\nalso: {teardown}")
        result.error = str(error)
    if result.error is not None and not result.duration_s:
        result.duration_s = time.monotonic() - started
    if teardown is not None:
        if result.status == "passed":
            result.error = teardown
        else:
            result.notes.append(teardown)
    return with_evidence(result, spec, spec_sha256)
