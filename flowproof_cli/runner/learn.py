"""The two runs `flowproof match learn` compares: the same flow recorded twice, elsewhere.

Each run is an ordinary record (the spec's job as `flowproof record` plans it: its suite's
environment, hooks and `match:` rules, the record upstream), of a copy of the project, so
nothing the agent writes lands in the user's checkout and no trace is written beside the
spec. The two runs differ in what a replay on another machine, another day differs in:

* the working directory: run 1 in a checkout inside its HOME (`.../one/home/work/<name>`, a
  laptop's layout), run 2 outside its HOME (`.../two/ci/<name>`, a CI runner's); the
  project keeps its folder name;
* HOME: a fresh folder each (a copy of `--home-template` when given);
* the date: run 2 runs DATE_OFFSET later under libfaketime, when `faketime` is installed
  and works (the date is then not varied, and the learning says so).

Each passing run's recording is read back from where record staged it, and everything is
removed at the end, whatever happens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from flowproof_cli import trace as traces
from flowproof_cli.cassette.learn import Place
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.cassette.upstream import TIMEOUT_VARIABLE
from flowproof_cli.cassette.upstreams import upstreams_from_environment
from flowproof_cli.errors import ConfigError
from flowproof_cli.mode import Mode
from flowproof_cli.runner.job import FlowJob, plan_jobs
from flowproof_cli.runner.parallel import run_jobs
from flowproof_cli.spec import load_spec
from flowproof_cli.verdict import FlowResult

DATE_OFFSET_DAYS = 33  # another day, month and weekday
#: What libfaketime's `faketime` sets to load itself into a process (Linux; macOS).
_PRELOAD_VARIABLES = ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES", "DYLD_FORCE_FLAT_NAMESPACE")
_PROBE = (
    "import datetime, json, os; "
    "print(json.dumps({'environ': dict(os.environ), 'today': datetime.date.today().isoformat()}))"
)
_SKIPPED_WHEN_COPIED = (".flowproof", "__pycache__")


@dataclass(frozen=True)
class Dating:
    """How run 2's date differs: the variables that shift it, or why it was not varied."""

    environ: dict[str, str]
    today: str  # the date run 2's agent sees
    note: str  # e.g. "33 days later (faketime)", or why not

    @property
    def varied(self) -> bool:
        return bool(self.environ)


@dataclass(frozen=True)
class LearnRun:
    number: int  # 1 or 2
    place: Place
    date: str  # what day it ran on, in words
    result: FlowResult
    turns: list[Turn] | None  # None when the run failed: nothing recorded
    rules_in_force: list[dict[str, object]]  # the snapshot of the match rules it ran with


def faketime_dating(
    offset_days: int = DATE_OFFSET_DAYS, which: Callable[[str], str | None] = shutil.which
) -> Dating:
    """The environment that runs a process `offset_days` later, asked of `faketime` itself
    (it knows where its library is), and checked: a probe under it must see that date."""
    today = datetime.date.today()
    faketime = which("faketime")
    if faketime is None:
        return Dating(
            {},
            today.isoformat(),
            "the same day: `faketime` (libfaketime) is not "
            "installed, so the date was not varied and no date rule can be learned",
        )
    offset = f"+{offset_days}d"
    try:
        done = subprocess.run(
            [faketime, "-f", offset, sys.executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        probe = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        probe = None
    later = today + datetime.timedelta(days=offset_days)
    if not isinstance(probe, dict) or probe.get("today") != later.isoformat():
        return Dating(
            {},
            today.isoformat(),
            f"the same day: {faketime} did not shift the date "
            "of a probe, so the date was not varied",
        )
    seen = probe.get("environ") or {}
    environ = {name: str(seen[name]) for name in _PRELOAD_VARIABLES if name in seen}
    environ |= {"FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    return Dating(environ, later.isoformat(), f"{offset_days} days later, {later} (faketime)")


def _project_of(spec_path: Path, project: Path | None) -> tuple[Path, Path]:
    """The folder to copy, and the spec's path inside it."""
    spec = spec_path.resolve()
    root = (project or spec_path.parent).resolve()
    if not root.is_dir():
        raise ConfigError(f"{project}: no such folder. Fix: give --project the folder to copy")
    try:
        inside = spec.relative_to(root)
    except ValueError:
        raise ConfigError(
            f"{spec_path} is not inside the project folder {project}. Fix: give --project a "
            "folder that holds the spec"
        ) from None
    return root, inside


def _copy(root: Path, to: Path) -> None:
    try:
        shutil.copytree(
            root, to, symlinks=True, ignore=shutil.ignore_patterns(*_SKIPPED_WHEN_COPIED)
        )
    except (OSError, shutil.Error) as exc:
        raise ConfigError(
            f"could not copy {root} to {to} for a run: {exc}. Fix: free some space in "
            f"{to.parent.parent}, or give --project a smaller folder"
        ) from None


def _home(path: Path, template: Path | None) -> None:
    if template is None:
        path.mkdir(parents=True)
        return
    try:
        shutil.copytree(template, path, symlinks=True)
    except (OSError, shutil.Error) as exc:
        raise ConfigError(
            f"could not copy the HOME template {template}: {exc}. Fix: check --home-template"
        ) from None


@contextlib.contextmanager
def _workspace() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="flowproof-learn-")).resolve()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _recording(result: FlowResult) -> tuple[list[Turn] | None, list[dict[str, object]]]:
    """The turns a passing run recorded (read from where record staged them), and the
    match rules it ran with."""
    staged = result.staged_trace
    if not result.passed or staged is None:
        return None, []
    recording = traces.load(staged)
    return list(recording.turns), list(recording.match)


def learn_runs(
    spec_path: Path,
    *,
    environ: Mapping[str, str],
    project: Path | None = None,
    home_template: Path | None = None,
    timeout_s: float | None = None,
    upstream_timeout_s: float | None = None,
    dating: Dating | None = None,
    on_run: Callable[[LearnRun], None] | None = None,
) -> list[LearnRun]:
    """Record the flow twice, from two places, HOMEs and dates. FlowproofError (exit 2)
    for a spec that does not load, no upstream, a folder that cannot be copied."""
    load_spec(spec_path)  # a bad spec is named now, before anything is copied
    root, inside = _project_of(spec_path, project)
    if home_template is not None and not home_template.is_dir():
        raise ConfigError(f"{home_template}: no such folder. Fix: check --home-template")
    (job,) = plan_jobs([spec_path], mode=Mode.RECORD, environ=environ, timeout_s=timeout_s)
    upstreams_from_environment(job.environ)  # no upstream: said now, not after two copies
    dating = dating or faketime_dating()
    today = datetime.date.today().isoformat()
    with _workspace() as workspace:
        layouts = (
            (workspace / "one" / "home", workspace / "one" / "home" / "work" / root.name),
            (workspace / "two" / "home", workspace / "two" / "ci" / root.name),
        )
        jobs: list[FlowJob] = []
        places: list[Place] = []
        for number, (home, checkout) in enumerate(layouts, start=1):
            _home(home, home_template)
            _copy(root, checkout)
            cwd = checkout / inside.parent
            # PWD too: an agent that takes its folder from PWD must see the copy it runs in.
            run_environ = {**job.environ, "HOME": str(home), "PWD": str(cwd)}
            if upstream_timeout_s is not None:
                run_environ[TIMEOUT_VARIABLE] = repr(upstream_timeout_s)
            if number == 2:
                run_environ |= _preloaded(dating.environ, run_environ)
            jobs.append(
                dataclasses.replace(
                    job,
                    spec_path=checkout / inside,
                    trace_path=workspace / f"run-{number}.trace.yaml",
                    environ=run_environ,
                )
            )
            places.append(Place(str(cwd), str(home)))
        dates = (f"today, {today}", dating.note)
        runs: list[LearnRun] = []

        def done(result: FlowResult) -> None:
            number = len(runs) + 1
            turns, rules = _recording(result)
            run = LearnRun(number, places[number - 1], dates[number - 1], result, turns, rules)
            runs.append(run)
            if on_run is not None:
                on_run(run)

        run_jobs(jobs, workers=1, on_result=done)
    return runs


def _preloaded(shift: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The date shift's variables, its library ahead of any the environment preloads."""
    merged = dict(shift)
    for name in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES"):
        if name in shift and environ.get(name):
            merged[name] = f"{shift[name]}:{environ[name]}"
    return merged
