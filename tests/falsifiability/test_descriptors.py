"""File descriptors: one flow cannot starve the run of them, running out is named, and
stderr is never flooded.

Every connection an agent holds to its proxy listener costs flowproof a descriptor, and all
flows of a run share the process's limit (`ulimit -n`). The probes run flowproof under a low
limit, as a shell would (`bash -c 'ulimit -n 1024; exec flowproof run DIR'`), with agents
that hold many idle connections (`tests/e2e/agents/py_connection_hog.py`) beside a normal
flow that starts a moment later.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest

from flowproof_cli.trace import trace_path_for
from tests.conftest import CliResult, run_cli, run_command
from tests.e2e.flows import AGENTS, agent_command, set_agent_env, write_flow
from tests.fakes.fake_upstream import FakeUpstream

HOG = AGENTS / "py_connection_hog.py"
HERE = Path(__file__).resolve().parent
FLOOD = HERE / "agents" / "accept_flood.py"
EXIT_WAIT_S = 240
#: At most this many lines of stderr for a whole run, whatever went wrong in it.
STDERR_LINES = 40


def _record(spec: Path) -> None:
    with FakeUpstream(seed=1) as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"}
        result = run_cli("record", spec, cwd=spec.parent, env=upstream)
    assert result.code == 0, result.output


def _hog(folder: Path, name: str, timeout: float) -> Path:
    spec = write_flow(folder, name=name, command=agent_command(HOG), timeout=timeout)
    _record(spec)
    return spec


def _normal(folder: Path, timeout: float, delay_s: float = 3.0) -> Path:
    """The tool-loop flow, its agent started `delay_s` late: it needs the proxy once the
    hogs already hold what they hold."""
    late = "/bin/sh -c " + shlex.quote(f"sleep {delay_s}; exec {agent_command()}")
    spec = write_flow(folder, name="normal", command=late, timeout=timeout)
    _record(spec)
    return spec


def _run_limited(folder: Path, limit: int, jobs: int) -> CliResult:
    """`flowproof run -j JOBS FOLDER` under `ulimit -n LIMIT`, as a shell runs it."""
    shutil.rmtree(folder / ".flowproof", ignore_errors=True)
    command = f"ulimit -n {limit}; exec {shlex.quote(sys.executable)} -m flowproof_cli run -j {jobs} {shlex.quote(str(folder))}"
    return run_command(["bash", "-c", command], cwd=folder, timeout=EXIT_WAIT_S)


def _verdict(result: CliResult, flow: str) -> str:
    """The verdict line of `flow` (`PASS: ...` or `FAIL: ...`) and its indented lines."""
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if f": {flow} flow" in line)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), None)
    return "\n".join(lines[start:end])


@pytest.mark.slow
def test_a_flow_holding_1100_idle_connections_cannot_starve_the_flow_beside_it(
    tmp_path: Path,
) -> None:
    """The probe's case. Before, under `ulimit -n 1024` the hog's connections took every
    descriptor: the normal flow beside it failed with `did not finish within 30 s`, and the
    failure named neither the hog nor the limit."""
    hog = _hog(tmp_path, "hog", timeout=30)
    set_agent_env(hog, HOG_CONNECTIONS="1100", HOG_OPENED=str(tmp_path / "opened"))
    _normal(tmp_path, timeout=30)
    result = _run_limited(tmp_path, 1024, jobs=2)
    assert (tmp_path / "opened").read_text() == "1100", "the hog did not hold its connections"
    assert result.code == 1, result.output
    assert _verdict(result, "normal").startswith("PASS: normal flow"), result.output
    hog_verdict = _verdict(result, "hog")
    assert hog_verdict.startswith("FAIL: hog flow"), result.output
    assert (
        " - the agent held 256 connections open to flowproof's proxy on 127.0.0.1:"
    ) in hog_verdict.splitlines()[0], result.output
    assert "at once, the limit of one listener (a quarter of `ulimit -n` 1024, at most 512)" in (
        hog_verdict
    )
    assert "Traceback" not in result.output
    assert len(result.stderr.splitlines()) <= STDERR_LINES, result.stderr[-3000:]


@pytest.mark.slow
def test_running_out_of_descriptors_is_named_with_the_limit(tmp_path: Path) -> None:
    """Several flows, each under the cap, that together hold more than the process may
    open: a flow whose connection could not be accepted says why and names the limit,
    instead of only `did not finish within`. The five hogs are one flow under five names:
    recorded once, its trace copied beside the other four."""
    recorded = trace_path_for(_hog(tmp_path, "hog0", timeout=8))
    for number in range(1, 5):
        spec = write_flow(tmp_path, name=f"hog{number}", command=agent_command(HOG), timeout=8)
        shutil.copyfile(recorded, trace_path_for(spec))
    for spec in sorted(tmp_path.glob("hog*.flow.yaml")):
        set_agent_env(spec, HOG_CONNECTIONS="60", AGENT_HANG_AFTER="0")
    result = _run_limited(tmp_path, 256, jobs=5)
    assert result.code == 1, result.output
    assert (
        "flowproof ran out of file descriptors (limit 256, `ulimit -n`) and could not accept the "
        "agent's connection on 127.0.0.1:"
    ) in result.stdout, result.output
    assert "Fix: raise the limit (`ulimit -n 4096` before flowproof) or run fewer flows at" in (
        result.stdout
    )
    assert "Traceback" not in result.output
    assert len(result.stderr.splitlines()) <= STDERR_LINES, result.stderr[-3000:]


def test_asyncio_accept_retries_after_running_out_never_flood_stderr() -> None:
    """The flood's mechanism, without the timing: Python's accept loop meets EMFILE once per
    queued connection, schedules a retry for each, and every retry of a listener closed since
    raised into the loop's default handler, a traceback each (900 in 3 s here; 12,299 in the
    probe). Now each kind of error is one line, with a count."""
    started = time.monotonic()
    done = run_command([sys.executable, FLOOD], timeout=EXIT_WAIT_S)
    assert done.code == 0, done.stderr[-3000:]
    assert "the listener met EMFILE" in done.stdout, (done.stdout, time.monotonic() - started)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(done.stderr.splitlines()) <= STDERR_LINES, done.stderr[-3000:]
