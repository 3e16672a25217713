"""`--fs-report` on a real contained run: a long filesystem report is summarized by default,
`full` lists every syscall, `off` none, and the blocked destination is never buried."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.egress.conftest import lab_fixture
from tests.egress.fs_report_lab import DELETED

pytestmark = [pytest.mark.egress, pytest.mark.slow, pytest.mark.usefixtures("netns")]

BLOCKED_HEADER = "egress report: 1 blocked call(s)"
BLOCKED = re.compile(r"  blocked tcp 203\.0\.113\.7:443 \(connect\) at \d+ms")
UNLINK = re.compile(r"  unlink /\S+ at \d+ms")


lab = lab_fixture("egress-fs-report-lab", "tests.egress.fs_report_lab", "FS_LAB")


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
