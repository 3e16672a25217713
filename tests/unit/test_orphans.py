"""A descendant that leaves the agent's process group (setsid) still ends with the flow."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from flowproof_cli.runner import cgroups, command, orphans
from tests.e2e.sockets_and_pids import is_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def _run_escaping_agent(tmp_path: Path) -> int:
    pidfile = tmp_path / "escaped.pid"
    # The descendant writes its pid only once it is in its own session, and the agent waits
    # for that: otherwise the group kill could reach it before its setsid() ran.
    script = (
        f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & "
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done"
    )
    asyncio.run(command.run_agent(["sh", "-c", script], env=os.environ, cwd=tmp_path, timeout_s=30))
    deadline = time.monotonic() + 5
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return int(pidfile.read_text())


def test_a_setsid_descendant_is_ended_with_the_agent(tmp_path: Path) -> None:
    escaped = _run_escaping_agent(tmp_path)
    assert is_gone(escaped), "a setsid descendant outlived the flow"


def test_without_adoption_the_setsid_descendant_would_survive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: what the process-group kill alone leaves behind (no adoption, and no
    cgroup of the agent's own, which would end it too: tests/unit/test_cgroups.py)."""
    monkeypatch.setattr(orphans, "become_subreaper", lambda: False)
    monkeypatch.setattr(cgroups, "cgroup_base", lambda: None)
    escaped = _run_escaping_agent(tmp_path)
    try:
        assert not is_gone(escaped)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


def test_children_lists_only_direct_children(tmp_path: Path) -> None:
    before = orphans.children()
    process = os.posix_spawnp("sleep", ["sleep", "30"], os.environ)
    try:
        assert orphans.children() - before == {process}
        assert orphans.end_adopted(before) == [process]
        assert is_gone(process)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process, signal.SIGKILL)


def test_a_flow_ends_only_the_orphans_that_carry_its_marker() -> None:
    """Flows run side by side in one process: one flow's cleanup must not end a process of
    the flow beside it (another marker) nor one of flowproof's own (no marker)."""
    before = orphans.children()
    mine = os.posix_spawnp("sleep", ["sleep", "30"], {**os.environ, "FLOWPROOF_LLM_PROXY": "a"})
    theirs = os.posix_spawnp("sleep", ["sleep", "30"], {**os.environ, "FLOWPROOF_LLM_PROXY": "b"})
    unmarked = os.posix_spawnp("sleep", ["sleep", "30"], {"PATH": os.environ["PATH"]})
    try:
        ended = orphans.end_adopted(before, marker=b"FLOWPROOF_LLM_PROXY=a", settle=False)
        assert ended == [mine]
        assert not is_gone(theirs) and not is_gone(unmarked)
        assert sorted(orphans.sweep(before)) == sorted([theirs, unmarked])  # the run's end
        assert is_gone(theirs) and is_gone(unmarked)
    finally:
        for pid in (mine, theirs, unmarked):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
