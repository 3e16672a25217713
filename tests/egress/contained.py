"""Run a plain command contained, start to end: what the tests and the benchmark use.

The runner owns process creation itself (timeouts, output capture) and drives `Launch`
directly; this is the same sequence for a command that needs none of that.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from flowproof_cli.egress import EgressReport, Launch, Policy
from flowproof_cli.process import signal_group


@dataclass
class ContainedRun:
    returncode: int
    report: EgressReport


def run_contained(
    argv: list[str],
    policy: Policy | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
) -> ContainedRun:
    """Run a command contained (when this host can) and return its exit status and report."""
    launch = Launch.prepare(policy)
    try:
        process = subprocess.Popen(
            launch.wrap(argv),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            pass_fds=launch.pass_fds,
            start_new_session=True,
        )
        try:
            launch.attach_sync(process.pid)
            returncode = process.wait(timeout)
        finally:
            signal_group(process.pid, signal.SIGKILL)
            process.wait()
    finally:
        report = launch.finish()
    return ContainedRun(returncode, report)
