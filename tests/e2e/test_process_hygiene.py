"""flowproof never leaves a process or a listening port behind, however a flow ends.

The probe agent double-forks an orphan (same process group, no parent waiting for it) and
writes its pids and the proxy port to files, so each test can check, after flowproof is
done, that the agent, the orphan and the proxy's listener are all gone: after a pass, a
divergence, a timeout, SIGTERM and SIGINT to flowproof, and a cancelled flow in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowproof_cli.cassette import Mode
from flowproof_cli.runner.flow import run_flow
from flowproof_cli.spec import load_spec
from tests.conftest import run_cli, start_cli
from tests.e2e.flows import AGENTS, agent_command, set_agent_env, write_flow
from tests.e2e.sockets_and_pids import eventually, free_port, holders_of, is_gone, is_listening
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

PROBE = AGENTS / "py_hygiene_probe.py"


class Probe:
    """The files the probe agent writes, read back."""

    def __init__(self, folder: Path):
        self.folder = folder

    def ready(self) -> bool:
        return all((self.folder / name).exists() for name in ("agent.pid", "proxy.port"))

    def value(self, name: str) -> int:
        return int((self.folder / name).read_text())

    def assert_all_gone(self) -> None:
        agent, orphan, port = (
            self.value("agent.pid"),
            self.value("orphan.pid"),
            self.value("proxy.port"),
        )
        assert eventually(lambda: is_gone(agent), 10), f"agent {agent} survived"
        assert eventually(lambda: is_gone(orphan), 10), f"orphan {orphan} survived"
        assert not self.listeners(port), f"the proxy port {port} is still listening"

    def listeners(self, port: int) -> set[int]:
        """Who of this test still listens on `port`: this process (an in-process flow) or
        one carrying the probe's folder (the agent's tree). Once flowproof is gone, the
        kernel may give the port to another test's `bind(0)`; that one is not a leak."""
        mark = f"HYGIENE_DIR={self.folder}".encode()
        ours = set()
        for pid in holders_of(port):  # scans /proc only when something listens there
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if pid == os.getpid() or mark in environ:
                ours.add(pid)
        return ours

    def reset(self) -> None:
        for name in ("agent.pid", "orphan.pid", "proxy.port"):
            (self.folder / name).unlink(missing_ok=True)


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[Probe]:
    folder = tmp_path / "probe"
    folder.mkdir()
    probe = Probe(folder)
    yield probe
    for name in ("agent.pid", "orphan.pid"):  # never leak a sleeper into the test run
        path = folder / name
        if path.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(path.read_text()), signal.SIGKILL)


def probe_flow(tmp_path: Path, probe: Probe, **env: str) -> Path:
    return write_flow(
        tmp_path,
        command=agent_command(PROBE),
        env={"HYGIENE_DIR": str(probe.folder), **env},
    )


def record(spec: Path) -> None:
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 0, result.output


@pytest.fixture
def recorded(tmp_path: Path, probe: Probe) -> Path:
    spec = probe_flow(tmp_path, probe)
    record(spec)
    probe.assert_all_gone()
    probe.reset()
    return spec


_LISTENER = (
    "import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); "
    "s.listen(1); print('up', flush=True); sys.stdin.read()"
)


@pytest.mark.parametrize("marked", [True, False])
def test_a_listener_counts_when_the_probes_tree_holds_it(probe: Probe, marked: bool) -> None:
    """The check can fail: a process carrying the probe's folder that still listens is a
    leak; a stranger that took the port since (another test's `bind(0)`) is not."""
    env = {**os.environ, "HYGIENE_DIR": str(probe.folder) if marked else "elsewhere"}
    port = free_port()
    holder = subprocess.Popen(
        [sys.executable, "-c", _LISTENER, str(port)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "up\n"
        assert probe.listeners(port) == ({holder.pid} if marked else set())
    finally:
        holder.kill()
        holder.wait()


def test_nothing_left_after_a_passing_replay(recorded: Path, probe: Probe) -> None:
    result = run_cli("run", recorded)
    assert result.code == 0, result.output
    probe.assert_all_gone()


def test_nothing_left_after_a_divergence(recorded: Path, probe: Probe) -> None:
    set_agent_env(recorded, AGENT_MODEL="gpt-4o")
    result = run_cli("run", recorded)
    assert result.code == 1
    assert "model changed" in result.stdout
    probe.assert_all_gone()


def test_nothing_left_after_a_timeout(recorded: Path, probe: Probe) -> None:
    set_agent_env(recorded, AGENT_HANG_AFTER="1", HYGIENE_IGNORE_TERM="1")
    result = run_cli("run", recorded, "--timeout", "3")
    assert result.code == 1
    assert "did not finish within 3 s and was killed" in result.stdout
    probe.assert_all_gone()


def wait_until_hanging(process: subprocess.Popen[str], probe: Probe) -> None:
    """Until the agent is up, its orphan spawned, and the proxy listening."""
    assert eventually(probe.ready, 30), "the probe agent did not start"
    assert eventually(lambda: is_listening(probe.value("proxy.port")), 10)
    time.sleep(1.0)  # let it make its first model call and hang
    assert process.poll() is None


@pytest.mark.parametrize(
    ("sig", "code", "says"),
    [
        (signal.SIGTERM, 128 + signal.SIGTERM, "SIGTERM received: stopping the agent"),
        (signal.SIGINT, 128 + signal.SIGINT, "interrupted"),
    ],
)
def test_signals_to_flowproof_leave_nothing_behind(
    recorded: Path, probe: Probe, sig: signal.Signals, code: int | None, says: str
) -> None:
    set_agent_env(recorded, AGENT_HANG_AFTER="1", HYGIENE_IGNORE_TERM="1")
    process = start_cli("run", recorded)
    wait_until_hanging(process, probe)
    started = time.monotonic()
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - started < 15
    assert process.returncode != 0
    if code is not None:
        assert process.returncode == code, stderr
    assert says in stderr
    assert "Traceback" not in stderr, stderr
    probe.assert_all_gone()


def test_sigterm_during_record_writes_no_trace(tmp_path: Path, probe: Probe) -> None:
    spec = probe_flow(tmp_path, probe, AGENT_HANG_AFTER="1")
    with FakeUpstream() as fake:
        process = start_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
        wait_until_hanging(process, probe)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM
    assert not spec.with_name("weather.trace.yaml").exists()
    probe.assert_all_gone()


@pytest.mark.parametrize("cancels", [1, 2])
def test_a_cancelled_flow_ends_the_whole_group(recorded: Path, probe: Probe, cancels: int) -> None:
    """Any abort inside flowproof (an error, a cancellation) runs the same cleanup; a second
    cancellation during the SIGTERM grace period must not skip the SIGKILL."""
    set_agent_env(recorded, AGENT_HANG_AFTER="1", HYGIENE_IGNORE_TERM="1")
    spec = load_spec(recorded)
    trace = recorded.with_name("weather.trace.yaml")

    async def scenario() -> None:
        flow = asyncio.create_task(run_flow(spec, mode=Mode.REPLAY, trace_path=trace))
        while not probe.ready():
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        for _ in range(cancels):
            flow.cancel()
            await asyncio.sleep(0.2)
        with pytest.raises(asyncio.CancelledError):
            await flow

    asyncio.run(scenario())
    probe.assert_all_gone()
