"""`--fs-report` on a real contained run: a long filesystem report is summarized by default,
`full` lists every syscall, `off` none, and the blocked destination is never buried."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import REPO, computed_once
from tests.egress.fs_report_lab import DELETED

pytestmark = [pytest.mark.egress, pytest.mark.slow, pytest.mark.usefixtures("netns")]

BLOCKED_HEADER = "egress report: 1 blocked call(s)"
BLOCKED = re.compile(r"  blocked tcp 203\.0\.113\.7:443 \(connect\) at \d+ms")
UNLINK = re.compile(r"  unlink /\S+ at \d+ms")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every run's outcome, once per session (`computed_once`)."""
    outcome: dict[str, Any] = computed_once(tmp_path_factory, "egress-fs-report-lab", _run_lab)
    return outcome


def _run_lab() -> dict[str, Any]:
    spec = {"outer_netns": os.readlink("/proc/self/ns/net")}
    completed = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "tests.egress.fs_report_lab", json.dumps(spec)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("FS_LAB ")]
    assert completed.returncode == 0 and lines, completed.stdout + completed.stderr
    return dict(json.loads(lines[-1][7:]))


def test_the_default_summarizes_and_prints_the_blocked_call_first(lab: dict[str, Any]) -> None:
    record = lab["record"]
    assert record["code"] == 0, record
    stderr = record["stderr"].splitlines()
    assert stderr[0] == BLOCKED_HEADER and BLOCKED.fullmatch(stderr[1]), stderr
    (header,) = [line for line in stderr if line.startswith("filesystem observation")]
    assert header == (
        f"filesystem observation: observed (linux seccomp); {DELETED + 1} destructive "
        "syscall(s) (summary; --fs-report full lists every one)"
    )
    assert f"  per syscall: unlink {DELETED + 1}" in stderr
    assert len([line for line in stderr if UNLINK.fullmatch(line)]) == 5
    assert f"  ... {DELETED + 1 - 5} more" in stderr


def test_full_lists_every_syscall_and_off_none(lab: dict[str, Any]) -> None:
    full, off = lab["full"], lab["off"]
    assert full["code"] == 0 and off["code"] == 0, (full, off)
    lines = full["stderr"].splitlines()
    assert len([line for line in lines if UNLINK.fullmatch(line)]) == DELETED + 1
    assert BLOCKED_HEADER in lines
    assert "filesystem observation" not in off["stderr"]
    assert off["stderr"].splitlines()[:1] == [BLOCKED_HEADER]
    assert "PASS: noisy flow" in off["stdout"]
