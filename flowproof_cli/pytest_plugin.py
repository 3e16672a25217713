"""pytest plugin: every `*.flow.yaml` is a test item, replayed (or recorded) as the CLI does.

Which flows are collected (`flowproof_collect` in the ini file):

* `explicit` (the default): flows below a path given on the command line (`pytest specs/`,
  `pytest specs/chat.flow.yaml`). A bare `pytest` that reads `testpaths` collects none, so a
  project whose own tests sit beside example flows keeps its `pytest` run as it was.
* `always`: every flow pytest's collection reaches, `testpaths` included.
* `never`: none.

Each process runs its flows through one event loop and one proxy (`runner.job.LazyHub`),
started by the first flow that needs it and stopped when the session ends: a pytest-xdist
worker is such a process, so `-n 4` means four proxies, not one per flow.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from flowproof_cli.trace.storage import SPEC_SUFFIX

if TYPE_CHECKING:
    from flowproof._api import FlowRun
    from flowproof_cli.runner.discovery import Shard
    from flowproof_cli.runner.job import FlowJob, LazyHub
    from flowproof_cli.verdict import FlowResult

COLLECT_MODES = ("explicit", "always", "never")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flowproof", "flowproof flows (*.flow.yaml)")
    group.addoption(
        "--flowproof-record",
        action="store_true",
        default=False,
        help="Record the collected flows against the real model instead of replaying them.",
    )
    group.addoption(
        "--flowproof-keep-going",
        action="store_true",
        default=False,
        help="After a divergence, let the agent run to its own end (as `flowproof run "
        "--keep-going`); without it, it is stopped 2 s after the first divergence.",
    )
    group.addoption(
        "--flowproof-all-changes",
        action="store_true",
        default=False,
        help="On a divergence, list every changed field of the request, not the first few.",
    )
    group.addoption(
        "--flowproof-shard",
        metavar="K/N",
        default=None,
        help="Run only shard K of N of the collected flows (sorted by path, every Nth).",
    )
    parser.addini(
        "flowproof_collect",
        "Which *.flow.yaml become items: explicit (below a path given on the command "
        "line), always, or never.",
        default="explicit",
    )


def pytest_configure(config: pytest.Config) -> None:
    from flowproof_cli.runner.discovery import parse_shard  # noqa: PLC0415

    collect = str(config.getini("flowproof_collect")).strip()
    if collect not in COLLECT_MODES:
        raise pytest.UsageError(
            f"flowproof_collect = {collect!r}: use one of {', '.join(COLLECT_MODES)}"
        )
    shard_text = config.getoption("flowproof_shard")
    shard = None
    if shard_text is not None:
        try:
            shard = parse_shard(shard_text)
        except ValueError as exc:
            raise pytest.UsageError(f"--flowproof-shard {exc}") from None
    config.stash[_STATE] = _State(config, shard)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.endswith(SPEC_SUFFIX) and _collects(parent.config, file_path):
        return FlowFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """pytest walks only folders and regular files: a FIFO, a device or a broken link named
    `*.flow.yaml` would be left out unseen. Each becomes an item whose error says what it is
    (its spec is never opened: a FIFO would block)."""
    report = yield
    if isinstance(collector, pytest.Directory) and report.passed:
        for path in sorted(collector.path.glob(f"*{SPEC_SUFFIX}")):
            if not (path.is_dir() or path.is_file()) and _collects(collector.config, path):
                report.result.append(FlowFile.from_parent(collector, path=path))
    return report


@pytest.hookimpl(trylast=True)  # after -k and -m: the shard splits what was selected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = config.stash[_STATE].shard
    flows = [item for item in items if isinstance(item, FlowItem)]
    if shard is None or not flows:
        return
    mine = set(shard.select([item.path for item in flows], config.rootpath))
    deselected = [item for item in flows if item.path not in mine]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]


def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[_STATE].close()


@pytest.fixture
def flowproof_run(request: pytest.FixtureRequest) -> Callable[..., FlowRun]:
    """`flowproof_run(path, record=False)`: run a flow on this process's proxy and get its
    `flowproof.FlowRun` (verdict and trajectory). Relative paths are from the test file."""
    state = request.config.stash[_STATE]
    here = request.path.parent

    def run(path: str | os.PathLike[str], *, record: bool = False) -> FlowRun:
        from flowproof._api import from_result, plan_job, settle  # noqa: PLC0415

        spec = Path(path) if Path(path).is_absolute() else here / path
        keep_going = request.config.getoption("flowproof_keep_going")
        result = state.run(plan_job(spec, record=record, keep_going=keep_going))
        settle(result)
        return from_result(result)

    return run


def _collects(config: pytest.Config, file_path: Path) -> bool:
    mode = str(config.getini("flowproof_collect")).strip()
    if mode != "explicit":
        return mode == "always"
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        return False
    # Where the file is, and (a link) what it leads to; realpath, which never raises on a
    # link loop, which a flow may be.
    targets = {Path(os.path.abspath(file_path)), Path(os.path.realpath(file_path))}
    for arg in config.args:
        given = Path(os.path.realpath(config.invocation_params.dir / arg.split("::")[0]))
        if any(target == given or given in target.parents for target in targets):
            return True
    return False


class _State:
    """This process's flow runs: one event loop and one proxy for all of them."""

    def __init__(self, config: pytest.Config, shard: Shard | None) -> None:
        self.config = config
        self.shard = shard
        self._runner: asyncio.Runner | None = None
        self._hub: LazyHub | None = None
        self._adopted: set[int] = set()
        self._jobs: dict[Path, FlowJob] | None = None
        self._plan_error: str | None = None

    def run(self, job: FlowJob) -> FlowResult:
        from flowproof_cli.mode import Mode  # noqa: PLC0415
        from flowproof_cli.runner import orphans  # noqa: PLC0415
        from flowproof_cli.runner.job import LazyHub, execute_async  # noqa: PLC0415

        if self._runner is None:
            self._adopted = orphans.children()
            self._runner = asyncio.Runner()
            self._hub = LazyHub(upstream_tls=job.mode is Mode.RECORD)
        assert self._hub is not None
        return self._runner.run(execute_async(job, self._hub))

    def job_for(self, item: FlowItem) -> FlowJob:
        """The item's job, every selected flow planned at once on first use, so each suite
        (its env, env_from) is prepared once per process as in a CLI run."""
        from flowproof_cli.errors import FlowproofError  # noqa: PLC0415
        from flowproof_cli.mode import Mode  # noqa: PLC0415
        from flowproof_cli.runner.job import plan_jobs  # noqa: PLC0415

        if self._jobs is None:
            paths = [each.path for each in item.session.items if isinstance(each, FlowItem)]
            mode = Mode.RECORD if self.config.getoption("flowproof_record") else Mode.REPLAY
            try:
                planned = plan_jobs(
                    paths or [item.path],
                    mode=mode,
                    environ=os.environ,
                    in_directory=True,
                    keep_going=self.config.getoption("flowproof_keep_going"),
                )
                self._jobs = {job.spec_path: job for job in planned}
            except FlowproofError as exc:
                self._jobs, self._plan_error = {}, str(exc)
        if self._plan_error is not None:
            raise FlowError(self._plan_error)
        return self._jobs[item.path]

    def close(self) -> None:
        if self._runner is None:
            return
        from flowproof_cli.runner import orphans  # noqa: PLC0415

        try:
            if self._hub is not None:
                self._runner.run(self._hub.stop())
            orphans.sweep(self._adopted)
        finally:
            self._runner.close()
            self._runner = None


_STATE = pytest.StashKey[_State]()


class FlowError(Exception):
    """A flow that failed or could not run: its message is the whole report."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class FlowFile(pytest.File):
    """A `*.flow.yaml`: one item, named by the file (the spec is read when it runs, so a
    broken spec is that item's error, not a collection error for the whole session)."""

    def collect(self) -> Iterator[FlowItem]:
        yield FlowItem.from_parent(self, name=self.path.name.removesuffix(SPEC_SUFFIX))


class FlowItem(pytest.Item):
    """One flow, run through this process's proxy."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result: FlowResult | None = None
        self._line = 0  # 0-based, for reportinfo; the failing step once known

    def runtest(self) -> None:
        from flowproof_cli.errors import ExitCode, FlowproofError, Terminated  # noqa: PLC0415

        state = self.config.stash[_STATE]
        job = state.job_for(self)
        try:
            result = state.run(job)
        except FlowproofError as exc:
            raise FlowError(str(exc)) from None
        except Terminated:  # SIGTERM: the flow cleaned up; no further flow starts
            pytest.exit("terminated by SIGTERM", returncode=int(ExitCode.TERMINATED))
        if job.mode.value == "record":
            from flowproof._api import settle  # noqa: PLC0415

            settle(result)
        self.result = result
        self.user_properties.append(("flowproof_status", result.status))
        if result.skipped is not None:
            skip = pytest.skip.Exception(result.skipped)
            skip._use_item_location = True  # reported at the spec, not at this module
            raise skip
        if not result.passed:
            for label, tail in (("stdout", result.stdout_tail), ("stderr", result.stderr_tail)):
                if tail.strip():  # pytest shows it under "Captured agent ...", JUnit too
                    self.add_report_section("call", f"agent {label}", tail)
            line = _failure_line(result)
            self._line = line - 1
            all_changes = bool(self.config.getoption("flowproof_all_changes"))
            raise FlowError(_report(result, all_changes=all_changes), line)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        if isinstance(excinfo.value, FlowError):
            line = excinfo.value.line
            path = _shown(self.path, self.config.invocation_params.dir)
            return f"{path}:{line}: {excinfo.value}" if line else f"{path}: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self._line, f"flow {self.name}"


def _shown(path: Path, invocation_dir: Path) -> Path:
    """The path as pytest shows locations: relative to where pytest was started, if below."""
    try:
        return path.relative_to(invocation_dir)
    except ValueError:
        return path


def _failure_line(result: FlowResult) -> int:
    """The spec line a failure points at: its step's; else, for a failure of a conversation
    turn (a divergence in it), the `user:` step that opened the turn; else the first
    prompt's (or `user:` step's); else 1."""
    for failure in result.failures:
        if failure.line:
            return failure.line
    try:
        from flowproof_cli.spec import load_spec  # noqa: PLC0415

        spec = load_spec(result.spec_path)
    except Exception:  # the error message already names the file and line
        return 1
    if result.conversation is not None:
        from flowproof_cli.evidence.turns import user_step_lines  # noqa: PLC0415

        opened = user_step_lines(result, [user.line for user in spec.conversation])
        for failure in result.failures:
            if failure.turn in opened:
                return opened[failure.turn]
    kinds = ("prompt", "user")
    lines = [step.line for step in spec.steps if step.kind in kinds and step.line]
    return lines[0] if lines else 1


def _report(result: FlowResult, *, all_changes: bool = False) -> str:
    """What the CLI says about a failed flow: the error or failures (with every changed
    field of a divergence under `--flowproof-all-changes`), the new recording's diff, and
    the notes (the agent's output goes to the report's sections)."""
    lines = [f"flow {result.name!r} {result.status}"]
    if result.conversation is not None:  # which turns passed, which failed
        from flowproof_cli.evidence.turns import turns_line  # noqa: PLC0415

        turns = turns_line(result)
        lines.extend([f"  {turns}"] if turns else [])
    if result.error is not None:
        lines.append(f"  error: {result.error}")
    failures = result.failure_texts
    if all_changes:
        from flowproof_cli.cli.output import shown_failures  # noqa: PLC0415

        failures = shown_failures(result, all_changes=True)
    lines.extend(f"  FAIL {failure}" for failure in failures)
    lines.extend(f"  | {line}" for line in result.trajectory_diff)
    lines.extend(f"  note: {note}" for note in result.notes)
    return "\n".join(lines)
