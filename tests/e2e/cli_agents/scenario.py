"""One coding CLI's "record on a laptop, replay in CI" story, run inside a loopback-only
network namespace (the CLIs phone home otherwise) and reported as JSON on stdout.

    unshare -n -m sh -c 'mount -t tmpfs tmpfs /dev/shm && ip link set lo up &&
        exec python -m tests.e2e.cli_agents.scenario CLI WORKDIR'

Record: the project (this folder's CLI subfolder) at WORKDIR/laptop/<cli>-app, HOME
WORKDIR/laptop/home-ann, today, in a fresh git repository, against the scripted fake model.
Then the fake stops, the laptop checkout is deleted, and every later run replays, with no
upstream at all, from a copy at WORKDIR/ci/checkout with HOME WORKDIR/ci/home-ci, on a later
day, with the trace committed and an untracked file added:

* `replay`: the flow as written (its `match: {presets: [<cli>]}`);
* `edited_prompt`: the same, with the task edited;
* `without_preset`: the same story for the flow without its `match:` key (recorded on the
  laptop without it too);
* `rerecord`: a record again in the CI checkout. Its requests (stored as matched: relocated
  and normalized) must equal the laptop's, so a re-recorded trace is unchanged in review
  (`requests_unchanged`; the fake is seeded, so the model's ids, which later requests echo,
  are the same twice).

The later day: Claude Code and opencode (dynamically linked native binaries), Gemini CLI
and Qwen Code (Node) run under libfaketime (`FAKETIME=+1d`) through a small shim on PATH
(flowproof itself is Python, whose sleeps libfaketime breaks, so only the CLI gets it);
Codex is a static binary that libfaketime does not reach, so its runs move across a day
boundary with `TZ` (UTC-12 at record, UTC+14 at replay).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from tests.fakes.cli_scripts import SCRIPTS
from tests.fakes.fake_upstream import FakeUpstream

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
NODE_BIN = REPO / "tests" / "node_modules" / ".bin"
VENV_BIN = Path(sys.executable).parent  # flowproof's own venv
SPEC = "read-notes.flow.yaml"
TRACE = "read-notes.trace.yaml"
#: The CLI executable each flow starts, as named in its `agent.command`.
BINARIES = {
    "claude-code": "claude",
    "codex": "codex",
    "gemini-cli": "gemini",
    "opencode": "opencode",
    "qwen-code": "qwen",
}
#: Codex is static (no libfaketime): these two zones are 26 hours apart, always another date.
RECORD_TZ, REPLAY_TZ = "Etc/GMT+12", "Etc/GMT-14"
LIBFAKETIME_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
)
SEED = 7
#: `--timeout` for the runs that diverge, per CLI: opencode retries the 409 (the AI SDK counts
#: 409 as retryable, and opencode backs off up to five times more), about 90 s before it gives
#: up; the verdict is the divergence either way (it is judged before the timeout).
DIVERGING_TIMEOUT = {"opencode": "45"}
ORIGINAL_TASK = "tell me the secret word"
EDITED_TASK = "tell me the secret animal"


def libfaketime() -> Path | None:
    """Debian's libfaketime (package `faketime`), if installed."""
    return next((Path(p) for p in LIBFAKETIME_CANDIDATES if Path(p).is_file()), None)


@dataclass
class Step:
    code: int
    stdout: str
    stderr: str
    day: str  # the date the CLI saw (`date +%F` under the same clock settings)
    seconds: float = 0.0  # how long the flowproof command took


@dataclass
class Machine:
    """One place the flow runs: a checkout, a HOME and a clock."""

    project: Path
    home: Path
    tz: str | None = None
    shim: Path | None = None  # a PATH folder whose CLI runs under libfaketime
    library: Path | None = None  # that libfaketime

    def day(self) -> str:
        """The date the CLI sees here."""
        environ = {"TZ": self.tz} if self.tz else {}
        if self.library is not None:
            environ.update(faketime_env(self.library))
        done = subprocess.run(["date", "+%F"], env=environ, capture_output=True, text=True)
        return done.stdout.strip()

    def environ(self) -> dict[str, str]:
        path = [str(NODE_BIN), str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"]
        if self.shim is not None:
            path.insert(0, str(self.shim))
        environ = {
            "PATH": os.pathsep.join(path),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(REPO),
        }
        if self.tz is not None:
            environ["TZ"] = self.tz
        return environ


def git(project: Path, *args: str) -> None:
    identity = ["-c", "user.name=Ann", "-c", "user.email=ann@example.com"]
    subprocess.run(["git", *identity, *args], cwd=project, check=True, capture_output=True)


def faketime_env(library: Path) -> dict[str, str]:
    """libfaketime a day ahead. Builds that know FAKETIME_DISABLE_SHM keep no clock in
    /dev/shm; Debian's 0.9.10 does, in files named by pid, which is why the namespace gets a
    private /dev/shm (a stale file whose pid comes round again fails the CLI's start)."""
    return {"LD_PRELOAD": str(library), "FAKETIME": "+1d", "FAKETIME_DISABLE_SHM": "1"}


def faketime_shim(folder: Path, binary: str, library: Path) -> Path:
    """A PATH folder whose `binary` is the real one, a day ahead (it pins no ids)."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / binary
    settings = " ".join(f"{key}={value}" for key, value in faketime_env(library).items())
    shim.write_text(f'#!/bin/sh\n{settings} exec {NODE_BIN / binary} "$@"\n')
    shim.chmod(0o755)
    return folder


def flowproof(
    machine: Machine,
    command: str,
    extra: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
) -> Step:
    environ = {**machine.environ(), **(extra or {})}
    argv = [str(VENV_BIN / "flowproof"), command, *options, str(machine.project / SPEC)]
    started = time.monotonic()
    done = subprocess.run(
        argv,
        env=environ,
        cwd=machine.project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = round(time.monotonic() - started, 1)
    return Step(done.returncode, done.stdout, done.stderr, machine.day(), seconds)


def edit_spec(project: Path, edit: str) -> None:
    spec = project / SPEC
    data = yaml.safe_load(spec.read_text())
    if edit == "prompt":
        step = data["steps"][0]
        step["prompt"] = step["prompt"].replace(ORIGINAL_TASK, EDITED_TASK)
    elif edit == "preset":
        data.pop("match")
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


def new_project(cli: str, laptop: Machine, edit: str | None = None) -> None:
    shutil.copytree(HERE / cli, laptop.project)
    if edit is not None:
        edit_spec(laptop.project, edit)
    laptop.home.mkdir(parents=True, exist_ok=True)
    git(laptop.project, "init", "-q", "-b", "main")
    git(laptop.project, "add", "-A")
    git(laptop.project, "commit", "-q", "-m", "A flow for the coding CLI")


def record(cli: str, machine: Machine) -> Step:
    with FakeUpstream(script=SCRIPTS[cli](), seed=SEED) as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        return flowproof(machine, "record", upstream)


def stored_requests(trace: Path) -> list[object]:
    return [turn["request"] for turn in yaml.safe_load(trace.read_text())["turns"]]


def move_to_ci(laptop: Machine, ci: Machine) -> None:
    """A copy of the project elsewhere, the trace committed, an untracked file added; the
    laptop checkout gone, so nothing can still read it."""
    shutil.copytree(laptop.project, ci.project)
    ci.home.mkdir(parents=True, exist_ok=True)
    git(ci.project, "add", TRACE)
    git(ci.project, "commit", "-q", "-m", "Record the trace")
    (ci.project / "scratch.txt").write_text("not committed\n")
    shutil.rmtree(laptop.project)


def elsewhere(machine: Machine, name: str) -> Machine:
    """Another checkout on the same machine (same HOME and clock)."""
    return Machine(
        machine.project.with_name(name), machine.home, machine.tz, machine.shim, machine.library
    )


def diverging_run(cli: str, machine: Machine) -> Step:
    """A replay expected to diverge, cut short for a CLI that retries a divergence long."""
    limit = DIVERGING_TIMEOUT.get(cli)
    return flowproof(machine, "run", options=("--timeout", limit) if limit else ())


def replay_edited(cli: str, ci: Machine) -> Step:
    """Replay from a fresh copy of the CI checkout with the task edited."""
    copy = elsewhere(ci, "checkout-edited")
    shutil.copytree(ci.project, copy.project)
    edit_spec(copy.project, "prompt")
    return diverging_run(cli, copy)


@dataclass
class Outcome:
    steps: dict[str, Step]
    requests_unchanged: bool | None = None


def scenario(cli: str, workdir: Path) -> Outcome:
    laptop = Machine(workdir / "laptop" / f"{cli}-app", workdir / "laptop" / "home-ann")
    ci = Machine(workdir / "ci" / "checkout", workdir / "ci" / "home-ci")
    if cli == "codex":
        laptop.tz, ci.tz = RECORD_TZ, REPLAY_TZ
    else:
        library = libfaketime()
        if library is None:
            raise SystemExit("libfaketime is not installed (Debian package `faketime`)")
        ci.shim = faketime_shim(workdir / "ci" / "shim", BINARIES[cli], library)
        ci.library = library
    laptop_bare, ci_bare = elsewhere(laptop, f"{cli}-bare"), elsewhere(ci, "checkout-bare")
    new_project(cli, laptop)
    new_project(cli, laptop_bare, edit="preset")
    steps = {"record": record(cli, laptop), "record_without_preset": record(cli, laptop_bare)}
    if any(step.code != 0 for step in steps.values()):
        return Outcome(steps)
    move_to_ci(laptop, ci)
    move_to_ci(laptop_bare, ci_bare)
    steps["replay"] = flowproof(ci, "run")
    steps["edited_prompt"] = replay_edited(cli, ci)
    steps["without_preset"] = diverging_run(cli, ci_bare)
    recorded = stored_requests(ci.project / TRACE)
    steps["rerecord"] = record(cli, ci)
    return Outcome(steps, stored_requests(ci.project / TRACE) == recorded)


def main(argv: list[str]) -> int:
    cli, workdir = argv[0], Path(argv[1])
    json.dump(asdict(scenario(cli, workdir)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
