"""One coding CLI's "record on a laptop, replay in CI" story, run inside a loopback-only
network namespace (the CLIs phone home otherwise) and reported as JSON on stdout.

    unshare -n -m sh -c 'mount -t tmpfs tmpfs /dev/shm && ip link set lo up &&
        exec python -m tests.e2e.cli_agents.scenario CLI WORKDIR [VERSION]'

VERSION is one of the CLI's releases the lockfile installs (`VERSIONS`; default the newest,
the CLI's own package). An older release is an npm alias, `tests/node_modules/<cli>-<version>`.
Either is put first on PATH under the CLI's command name, so the flow runs it unchanged.

Record: the project (this folder's CLI subfolder) at WORKDIR/laptop/<cli>-app, HOME
WORKDIR/laptop/home-ann, today, in a fresh git repository, against the scripted fake model.
Then the fake stops, the laptop checkout is deleted, and every later run replays, with no
upstream at all, from a copy at WORKDIR/ci/checkout with HOME WORKDIR/ci/home-ci, on a later
day, with the trace committed and an untracked file added:

* `replay`: the flow as written (its `match: {presets: [<cli>]}`);
* `edited_prompt`: the same, with the task edited;
* `without_preset`: the same story for the flow without its `match:` key (recorded on the
  laptop without it too);
* `worktree`: the flow as written, from a git worktree of the CI checkout;
* `rerecord`: a record again in the CI checkout. Its requests (stored as matched: relocated
  and normalized) must equal the laptop's, so a re-recorded trace is unchanged in review
  (`requests_unchanged`; the fake is seeded, so the model's ids, which later requests echo,
  are the same twice).

An older release (not the newest of VERSIONS) plays `replay` and `worktree`, then
`newer_release`: a copy of its CI checkout replayed by the newest release, which diverges
(the releases send other requests) and must say first that the agent changed version.

The later day: Claude Code and opencode (dynamically linked native binaries), Gemini CLI
and Qwen Code (Node) run
under libfaketime (`FAKETIME=+1d`) through a small shim on PATH (flowproof itself is Python,
whose sleeps libfaketime breaks, so only the CLI gets it); Codex is a static binary that
libfaketime does not reach, so its runs move across a day boundary with `TZ` (UTC-12 at
record, UTC+14 at replay).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from tests.fakes.cli_scripts import SCRIPTS, claude_code_conversation
from tests.fakes.fake_upstream import Script
from tests.fakes.responses_ws_upstream import ResponsesWebSocketUpstream
from tests.namespace_run import run_captured

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
NODE_MODULES = REPO / "tests" / "node_modules"
NODE_BIN = NODE_MODULES / ".bin"
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
#: The releases of each CLI the lockfile installs, oldest first, far enough apart that the
#: request layout changed: the last is the CLI's own package, the others npm aliases named
#: `<cli>-<version>` (tests/package.json). The CLI's preset names them (`versions_tested:`).
VERSIONS = {
    "claude-code": ("2.1.197", "2.1.332"),
    "codex": ("0.130.0", "0.171.0"),
    "gemini-cli": ("0.41.2", "0.61.0"),
    "opencode": ("1.18.33",),
    "qwen-code": ("0.24.4",),
}
#: Each CLI's own npm package (its newest release here).
PACKAGES = {
    "claude-code": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini-cli": "@google/gemini-cli",
    "opencode": "opencode-ai",
    "qwen-code": "@qwen-code/qwen-code",
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


def newest(cli: str) -> str:
    return VERSIONS[cli][-1]


def executable(cli: str, version: str | None = None) -> Path:
    """The CLI's executable at `version` (None: the newest), read from its package's `bin`
    (not node_modules/.bin, which an incremental `npm install` of an alias can repoint)."""
    version = version or newest(cli)
    name = PACKAGES[cli] if version == newest(cli) else f"{cli}-{version}"
    package = NODE_MODULES / name
    try:
        declared = json.loads((package / "package.json").read_text())["bin"]
    except (OSError, ValueError, KeyError):
        return package / "missing"  # not installed: the caller skips, naming `npm ci`
    relative = declared if isinstance(declared, str) else declared[BINARIES[cli]]
    return package / relative


def release_bin(folder: Path, cli: str, version: str | None) -> Path:
    """A PATH folder whose `claude`/`codex`/`gemini` is that release."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / BINARIES[cli]).symlink_to(executable(cli, version))
    return folder


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
    release: Path | None = None  # a PATH folder holding the CLI at the scenario's version

    def day(self) -> str:
        """The date the CLI sees here."""
        environ = {"TZ": self.tz} if self.tz else {}
        if self.library is not None:
            environ.update(faketime_env(self.library))
        done = subprocess.run(["date", "+%F"], env=environ, capture_output=True, text=True)
        return done.stdout.strip()

    def environ(self) -> dict[str, str]:
        path = [str(NODE_BIN), str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"]
        if self.release is not None:
            path.insert(0, str(self.release))
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


def faketime_shim(folder: Path, binary: str, real: Path, library: Path) -> Path:
    """A PATH folder whose `binary` is the `real` one, a day ahead (it pins no ids)."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / binary
    settings = " ".join(f"{key}={value}" for key, value in faketime_env(library).items())
    shim.write_text(f'#!/bin/sh\n{settings} exec {real} "$@"\n')
    shim.chmod(0o755)
    return folder


def flowproof(
    machine: Machine,
    command: str,
    extra: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
    spec: str = SPEC,
) -> Step:
    environ = {**machine.environ(), **(extra or {})}
    argv = [str(VENV_BIN / "flowproof"), command, *options, str(machine.project / spec)]
    started = time.monotonic()
    done = run_captured(argv, timeout=300, env=environ, cwd=machine.project)
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


def record(cli: str, machine: Machine, spec: str = SPEC, script: Script | None = None) -> Step:
    # It speaks the Responses API over WebSocket too: Codex's default transport.
    script = script or SCRIPTS[cli]()
    with ResponsesWebSocketUpstream(script=script, seed=SEED, api_key="k") as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        return flowproof(machine, "record", upstream, spec=spec)


def stored_requests(trace: Path) -> list[object]:
    return [turn["request"] for turn in yaml.safe_load(trace.read_text())["turns"]]


def stored_agents(trace: Path) -> list[str | None]:
    return [turn.get("agent") for turn in yaml.safe_load(trace.read_text())["turns"]]


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
        machine.project.with_name(name),
        machine.home,
        machine.tz,
        machine.shim,
        machine.library,
        machine.release,
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
    agents: list[str | None] = field(default_factory=list)  # per turn of the first trace
    #: The conversation turn of each recorded model call (a conversation's trace)
    conversation_turns: list[int | None] = field(default_factory=list)


def scenario(cli: str, workdir: Path, version: str | None = None) -> Outcome:
    """The whole story at `version` (None: the newest). An older release plays it with its
    preset only (the bare, edited and re-recorded runs prove the same of the preset at every
    release, and a replay that passes already matched every stored request), then its CI
    checkout replays with the newest release too (`newer_release`): the agent's version
    changed, which the divergence says first. Both replay from a git worktree of the CI
    checkout as well (`worktree`)."""
    version = version or newest(cli)
    older = version != newest(cli)
    laptop = Machine(workdir / "laptop" / f"{cli}-app", workdir / "laptop" / "home-ann")
    ci = Machine(workdir / "ci" / "checkout", workdir / "ci" / "home-ci")
    laptop.release = ci.release = release_bin(workdir / "release", cli, version)
    if cli == "codex":
        laptop.tz, ci.tz = RECORD_TZ, REPLAY_TZ
    else:
        library = libfaketime()
        if library is None:
            raise SystemExit("libfaketime is not installed (Debian package `faketime`)")
        real = executable(cli, version)
        ci.shim = faketime_shim(workdir / "ci" / "shim", BINARIES[cli], real, library)
        ci.library = library
    laptop_bare, ci_bare = elsewhere(laptop, f"{cli}-bare"), elsewhere(ci, "checkout-bare")
    new_project(cli, laptop)
    steps = {"record": record(cli, laptop)}
    if not older:
        new_project(cli, laptop_bare, edit="preset")
        steps["record_without_preset"] = record(cli, laptop_bare)
    if any(step.code != 0 for step in steps.values()):
        return Outcome(steps)
    agents = stored_agents(laptop.project / TRACE)
    move_to_ci(laptop, ci)
    steps["replay"] = flowproof(ci, "run")
    steps["worktree"] = replay_in_worktree(ci)
    if older:
        steps["newer_release"] = replay_with_newest(cli, ci, workdir)
        return Outcome(steps, None, agents)
    move_to_ci(laptop_bare, ci_bare)
    steps["edited_prompt"] = replay_edited(cli, ci)
    steps["without_preset"] = diverging_run(cli, ci_bare)
    recorded = stored_requests(ci.project / TRACE)
    steps["rerecord"] = record(cli, ci)
    return Outcome(steps, stored_requests(ci.project / TRACE) == recorded, agents)


def replay_in_worktree(ci: Machine) -> Step:
    """Replay from a git worktree of the CI checkout (the coding CLIs tell their model when
    they run in one): a detached checkout of the commit that holds the trace."""
    worktree = elsewhere(ci, "checkout-worktree")
    git(ci.project, "worktree", "add", "-q", "--detach", str(worktree.project))
    return flowproof(worktree, "run")


def replay_with_newest(cli: str, ci: Machine, workdir: Path) -> Step:
    """Replay a copy of the CI checkout (recorded by an older release) with the newest
    release the lockfile installs."""
    copy = elsewhere(ci, "checkout-newest")
    shutil.copytree(ci.project, copy.project)
    copy.release = release_bin(workdir / "release-newest", cli, None)
    if ci.library is not None:
        real = executable(cli)
        copy.shim = faketime_shim(workdir / "ci" / "shim-newest", BINARIES[cli], real, ci.library)
    return flowproof(copy, "run")


#: Claude Code as a conversation (`cli_agents/claude-code-conversation`): one process, a
#: message per turn on its stdin as stream-json, a turn ended by its `result` event.
CONVERSATION = "claude-code-conversation"
CONVERSATION_SPEC = "chat.flow.yaml"
CONVERSATION_TRACE = "chat.trace.yaml"
#: The second message, and what the mutation changes it to.
SECOND_MESSAGE = "Thanks. What was the secret word again?"
CHANGED_SECOND_MESSAGE = "Thanks. What was the secret word, once more?"


def conversation(workdir: Path) -> Outcome:
    """Claude Code's newest release as a two-turn conversation: recorded on the laptop
    against the scripted model (turn 1 reads notes.txt, turn 2 answers from the history),
    then with no upstream from a copy elsewhere with another HOME: replayed twice, and once
    with the second message changed (`changed_turn_2`), which must diverge in turn 2."""
    laptop = Machine(workdir / "laptop" / "chat-app", workdir / "laptop" / "home-ann")
    ci = Machine(workdir / "ci" / "chat", workdir / "ci" / "home-ci")
    new_project(CONVERSATION, laptop)
    steps = {"record": record(CONVERSATION, laptop, CONVERSATION_SPEC, claude_code_conversation())}
    if steps["record"].code != 0:
        return Outcome(steps)
    trace = yaml.safe_load((laptop.project / CONVERSATION_TRACE).read_text())
    shutil.copytree(laptop.project, ci.project)
    ci.home.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(laptop.project)
    steps["replay"] = flowproof(ci, "run", spec=CONVERSATION_SPEC)
    steps["replay_again"] = flowproof(ci, "run", spec=CONVERSATION_SPEC)
    changed = elsewhere(ci, "chat-changed")
    shutil.copytree(ci.project, changed.project)
    spec = changed.project / CONVERSATION_SPEC
    spec.write_text(spec.read_text().replace(SECOND_MESSAGE, CHANGED_SECOND_MESSAGE))
    steps["changed_turn_2"] = flowproof(changed, "run", spec=CONVERSATION_SPEC)
    turns = [turn.get("conversation_turn") for turn in trace["turns"]]
    return Outcome(steps, None, stored_agents(ci.project / CONVERSATION_TRACE), turns)


def main(argv: list[str]) -> int:
    cli, workdir = argv[0], Path(argv[1])
    if cli == CONVERSATION:
        json.dump(asdict(conversation(workdir)), sys.stdout)
        return 0
    version = argv[2] if len(argv) > 2 else None
    json.dump(asdict(scenario(cli, workdir, version)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
