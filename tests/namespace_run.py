"""One run of a probe or lab from the checkout that reports as a tagged JSON line, most of
them inside a network namespace of their own (`unshare -n`): what egress/lab.py,
egress/conftest.py's CLI labs, egress/test_handshake.py and falsifiability/network_lab.py
share, and `run_captured`, the one way tests run a child to read what it printed. Stdlib only,
so a lab can import it inside the namespace too."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run_captured(
    argv: Sequence[str | Path],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` with exactly `env` (None: this process's) from `cwd`, stdin closed (never
    the developer's terminal), its output captured as text; a non-zero exit is the caller's
    to judge."""
    return subprocess.run(
        [str(part) for part in argv],
        env=None if env is None else dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_tagged(
    argv: list[str],
    tag: str,
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    unshare: bool = True,
) -> dict[str, Any]:
    """Run `argv` (under `unshare -n` unless `unshare` is false, stdin closed); the JSON of
    its last stdout line that starts with `tag` and a space. A failed run, or one that
    printed no such line, raises with the tail of its output."""
    completed = run_captured(
        ["unshare", "-n", *argv] if unshare else argv, timeout=timeout, env=env
    )
    prefix = tag + " "
    lines = [line for line in completed.stdout.splitlines() if line.startswith(prefix)]
    if completed.returncode != 0 or not lines:
        raise AssertionError(
            f"{tag} run failed ({completed.returncode}):\n{completed.stdout[-4000:]}\n"
            f"{completed.stderr[-4000:]}"
        )
    return dict(json.loads(lines[-1][len(prefix) :]))
