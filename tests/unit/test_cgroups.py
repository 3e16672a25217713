"""An agent's cgroup: where it can be made, and what it ends that nothing else could."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from flowproof_cli.keeper import CGROUP
from flowproof_cli.process import KEEPER
from flowproof_cli.runner import cgroups, command, orphans
from flowproof_cli.runner.cgroups import AgentCgroup, own_cgroup
from tests.e2e.sockets_and_pids import is_gone

HYBRID = (
    "35 24 0:30 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory\n"
    "36 24 0:31 / /sys/fs/cgroup/unified rw,relatime shared:13 - cgroup2 cgroup2 rw\n"
)
UNIFIED = "30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"


@pytest.mark.parametrize(
    ("mountinfo", "cgroup", "expected"),
    [
        (HYBRID, "4:memory:/x\n0::/\n", "/sys/fs/cgroup/unified"),
        (
            UNIFIED,
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope",
        ),
        (UNIFIED.replace("/sys/fs/cgroup ", "/mnt/c\\040g "), "0::/a b\n", "/mnt/c g/a b"),
        ("31 24 0:26 /sub /cg rw - cgroup2 cgroup2 rw\n", "0::/sub/agent\n", "/cg/agent"),
        ("31 24 0:26 /sub /cg rw - cgroup2 cgroup2 rw\n", "0::/elsewhere\n", None),
        (HYBRID, "4:memory:/x\n", None),  # cgroup v1 only: no `0::` line
        ("35 24 0:30 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n", "0::/\n", None),  # no cgroup2
    ],
)
def test_the_own_cgroup_is_read_from_mountinfo_and_proc_cgroup(
    mountinfo: str, cgroup: str, expected: str | None
) -> None:
    assert own_cgroup(mountinfo, cgroup) == expected


def test_without_a_writable_cgroup_v2_the_agent_runs_as_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cgroups, "cgroup_base", lambda: None)
    assert AgentCgroup.make() is None
    assert AgentCgroup.make(str(tmp_path / "missing")) is None  # mkdir fails: no cgroup
    outcome = asyncio.run(
        command.run_agent(["sh", "-c", "exit 3"], env=os.environ, cwd=tmp_path, timeout_s=30)
    )
    assert outcome.exit_code == 3


def test_a_cgroup_the_child_cannot_join_is_removed_and_released(tmp_path: Path) -> None:
    """A folder that is not a cgroup (no cgroup.procs): joining does nothing and raises
    nothing, and ending removes the folder and releases it from the keeper."""
    made = AgentCgroup.make(str(tmp_path))
    assert made is not None and Path(made.path).is_dir()
    made.join()  # in the test process itself: a no-op here
    assert made.pids() == set()
    released: list[tuple[str, str]] = []
    real = KEEPER.release
    KEEPER.release = lambda kind, value: released.append((kind, str(value)))  # type: ignore[method-assign]
    try:
        made.end()
    finally:
        KEEPER.release = real  # type: ignore[method-assign]
    assert not Path(made.path).exists()
    assert released == [(CGROUP, made.path)]


def test_without_cgroup_kill_each_member_is_killed(tmp_path: Path) -> None:
    """A kernel before 5.14 has no cgroup.kill: the members listed in cgroup.procs are
    killed one by one (here a folder stands in for the cgroup, so the list never empties
    and the kill gives up at its bound)."""
    sleeper = os.posix_spawnp("sleep", ["sleep", "300"], os.environ)
    try:
        (tmp_path / "cgroup.procs").write_text(f"{sleeper}\n")
        AgentCgroup(str(tmp_path)).kill()
        assert os.waitpid(sleeper, 0)[1] == signal.SIGKILL
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(sleeper, signal.SIGKILL)
            os.waitpid(sleeper, 0)
    assert not (tmp_path / "cgroup.kill").exists(), "a control file was created, not written"


@pytest.mark.skipif(cgroups.cgroup_base() is None, reason="no writable cgroup v2 here")
def test_the_cgroup_ends_a_daemon_that_left_the_session_and_cleared_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing else would: the group kill misses it (setsid), and with no adoption (the
    subreaper is flowproof's own, gone when flowproof is killed) no marker finds it."""
    monkeypatch.setattr(orphans, "become_subreaper", lambda: False)
    pidfile = tmp_path / "daemon.pid"
    script = (
        f"setsid env -i sh -c 'echo $$ > {pidfile}; exec sleep 300' & "
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done"
    )
    made: list[AgentCgroup] = []
    real_make = AgentCgroup.make
    monkeypatch.setattr(
        AgentCgroup, "make", classmethod(lambda cls: made.append(real_make()) or made[-1])
    )
    asyncio.run(command.run_agent(["sh", "-c", script], env=os.environ, cwd=tmp_path, timeout_s=30))
    daemon = int(pidfile.read_text())
    try:
        deadline = time.monotonic() + 5
        while not is_gone(daemon) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert is_gone(daemon), "the daemon outlived its agent's cgroup"
        assert made and made[0] is not None and not Path(made[0].path).exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
