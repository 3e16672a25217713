"""Fixtures of the egress tests: capability checks and the small C helper.

Every test that runs an agent contained does so through tests/egress/lab.py, inside a
network namespace it creates (never on the host's network).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import computed_once
from tests.namespace_run import run_tagged

HERE = Path(__file__).resolve().parent


def _namespace_problem() -> str | None:
    if sys.platform != "linux":
        return "egress containment is Linux-only"
    from flowproof_cli.egress import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        return f"containment unavailable here: {reason}"
    for tool in ("unshare", "ip", "nsenter", "setpriv"):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing (scripts/bootstrap.sh installs iproute2/util-linux)"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return "cannot create a network namespace here (needs root): " + probe.stderr.decode()
    return None


@pytest.fixture(scope="session")
def netns() -> None:
    """Skip, naming why, when this machine cannot run a contained agent in a namespace."""
    problem = _namespace_problem()
    if problem is not None:
        pytest.skip(problem)


@pytest.fixture(scope="session")
def helper(tmp_path_factory: pytest.TempPathFactory, netns: None) -> Iterator[dict[str, str]]:
    """The C helper (i386 `int 0x80`, vfork), plus an execute-only copy of it."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (scripts/bootstrap.sh installs gcc)")
    folder = tmp_path_factory.mktemp("egress-helper")
    os.chmod(folder, 0o755)
    binary = folder / "helper"
    subprocess.run(
        [compiler, "-O1", "-o", str(binary), str(HERE / "helper.c")], check=True, timeout=60
    )
    execute_only = folder / "helper-execute-only"
    shutil.copy(binary, execute_only)
    os.chmod(binary, 0o755)
    os.chmod(execute_only, stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    yield {"helper": str(binary), "helper_execute_only": str(execute_only)}


ERRNO = {value: name for name, value in vars(errno).items() if name.startswith("E")}


def lab_fixture(key: str, module: str, tag: str) -> Callable[..., dict[str, Any]]:
    """A module fixture `lab`: every scenario of `module` (tests/egress/cli_lab.py,
    fs_report_lab.py) run once per session (`computed_once`) inside `unshare -n`, its
    outcome the JSON of the last stdout line tagged `tag`."""

    @pytest.fixture(scope="module")
    def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        outcome: dict[str, Any] = computed_once(tmp_path_factory, key, lambda: _run(module, tag))
        return outcome

    return lab


def _run(module: str, tag: str) -> dict[str, Any]:
    spec = {"outer_netns": os.readlink("/proc/self/ns/net")}
    return run_tagged([sys.executable, "-m", module, json.dumps(spec)], tag, timeout=600)
