"""Shared fixtures: the fake model upstream, a way to run the real `flowproof` CLI, and a
way to compute an expensive fixture once per session across xdist workers."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import cli_fork_server
from tests.fakes.fake_upstream import FakeUpstream
from tests.namespace_run import run_captured

REPO = Path(__file__).resolve().parent.parent
#: The Node packages of the agents and CLIs the tests drive (`npm ci` in tests/ fills it).
NODE_MODULES = REPO / "tests" / "node_modules"
#: Variables that would leak the developer's real model setup into a test.
_SCRUBBED = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "FLOWPROOF_AGENT_KEY",
    "FLOWPROOF_AGENT_UPSTREAM",
    "FORCE_COLOR",  # a CI runner's colour would put escape codes into the asserted output
    # A developer's AWS setup: record would sign Bedrock calls with it, a client would use it.
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
)


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    environ["PYTHONPATH"] = str(REPO)
    environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    environ.update(extra or {})
    return environ


def default_signals() -> None:
    """`preexec_fn` for a child a test will signal: SIGINT and SIGTERM at their defaults.

    A child inherits an ignored disposition across exec, and a shell gives a background job
    (`make test &`, a CI step without job control) SIGINT ignored, so a Ctrl-C the test sends
    would do nothing there. Set explicitly, the test behaves however the suite was started.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start_cli(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    text: bool = True,
    preexec_fn: Callable[[], None] = default_signals,
) -> subprocess.Popen[Any]:
    """Start `flowproof ARGS` to signal it: no stdin, piped output, default signal handling
    (or the dispositions `preexec_fn` sets in the child)."""
    return subprocess.Popen(
        [sys.executable, "-m", "flowproof_cli", *map(str, args)],
        env=clean_environ(env),
        cwd=cwd or REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
        preexec_fn=preexec_fn,  # default_signals: two syscalls in the child, no lock taken
    )


def run_cli(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> CliResult:
    """Run `flowproof ARGS` as a real process, the way a user or CI does.

    Served by a fork of the worker's `tests/cli_fork_server.py` (the CLI's modules already
    imported) where that behaves the same; else, or with FLOWPROOF_TEST_FORK=0, a new
    interpreter (`run_command`)."""
    words = [str(arg) for arg in args]
    served = cli_fork_server.request(
        words, clean_environ(env), cwd or REPO, timeout, server_env=clean_environ(), server_cwd=REPO
    )
    if served is not None:
        return CliResult(served.code, served.stdout, served.stderr)
    command = [sys.executable, "-m", "flowproof_cli", *words]
    return run_command(command, env=env, cwd=cwd, timeout=timeout)


def run_command(
    command: Sequence[str | Path],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> CliResult:
    """Run any command (the CLI wrapped in `unshare`, a patched `python -c`) as `run_cli`
    runs the CLI: the clean environment, from the repository, never on a terminal."""
    # stdin closed: never the developer's terminal, record would ask on it
    completed = run_captured(command, timeout=timeout, env=clean_environ(env), cwd=cwd or REPO)
    return CliResult(completed.returncode, completed.stdout, completed.stderr)


def computed_once(factory: pytest.TempPathFactory, key: str, compute: Callable[[], Any]) -> Any:
    """`compute()` once per test session, by whichever xdist worker asks first; a worker
    asking later waits for it and reads its result. The result must be plain data (it
    travels as JSON), and a path in it stays valid: it is under the session's temp folder.

    Each xdist worker is a process of its own, and `--dist worksteal` splits a module
    wherever it steals, so a module fixture alone (a recording, a whole CLI story, a group
    run) runs again in every worker that got one of its tests. A failure or a skip stores
    nothing: the next worker to ask computes again, and fails or skips the same way."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's folder, above every worker's own
    folder = base / "computed-once"
    folder.mkdir(exist_ok=True)
    stored = folder / f"{key}.json"
    with (folder / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
        if not stored.exists():
            partial = folder / f"{key}.partial"
            partial.write_text(json.dumps(compute()))
            partial.replace(stored)
        return json.loads(stored.read_text())  # the same value in every worker


@pytest.fixture
def fake_upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


@pytest.fixture
def flowproof() -> Callable[..., CliResult]:
    return run_cli
