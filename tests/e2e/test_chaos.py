"""`flowproof chaos` on a real flow: the openai SDK's own retries absorb the default kinds
(every cell survived), the same agent without retries crashes at every call (and
`--fail-on crashed` exits 1), a flow that fails without faults gets no cells.

The tests marked `ENGINE` in their docstring judge what the fault engine does at the model
boundary (the SDK's retries seen as extra requests, a cut of an unstreamed call n/a); the
others judge the command alone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.e2e.flows import AGENTS, agent_command, set_agent_env, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow


def _recorded(folder: Path, **agent_env: str) -> Path:
    """The tool-loop agent (openai SDK, its default 2 retries, `agent_env` more of its
    environment) recorded against the fake in `folder`: the flow."""
    spec = write_flow(folder, env={"AGENT_SDK_RETRIES": "2", **agent_env})
    with FakeUpstream() as fake:
        done = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert done.code == 0, done.output
    return spec


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tool-loop agent recorded against the fake."""
    return _recorded(tmp_path_factory.mktemp("chaos"))


@pytest.fixture(scope="module")
def streaming(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same agent reading its answers streamed."""
    return _recorded(tmp_path_factory.mktemp("chaos-stream"), AGENT_STREAM="1")


def copy(recording: Path, tmp_path: Path, **variables: str) -> Path:
    spec = shutil.copytree(recording.parent, tmp_path / "flows") / recording.name
    if variables:
        set_agent_env(spec, **variables)
    return spec


def chaos_fails(spec: Path, *options: str, said: tuple[str, ...] = ()) -> CliResult:
    """`flowproof chaos spec *options` exits 1, its stdout saying each of `said`; the
    result."""
    done = run_cli("chaos", spec, *options)
    assert done.code == 1, done.output
    for fragment in said:
        assert fragment in done.stdout, done.stdout
    return done


def cells(stdout: str) -> list[dict[str, object]]:
    document = json.loads(stdout)
    found: list[dict[str, object]] = document["cells"]
    return found


def test_the_sdks_retries_absorb_each_status(recording: Path) -> None:
    """ENGINE. Each status is retried by the SDK (one more request than the recording has
    calls); a cut of a call that was never streamed cannot apply."""
    done = run_cli("chaos", recording, "--json", "-j", "2", "--kinds", "429,500,529,cut")
    assert done.code == 0, done.output
    found = cells(done.stdout)
    calls = len(json.loads(done.stdout)["flows"][0]["calls"])
    assert calls >= 2 and len(found) == 4 * calls
    for cell in found:
        if cell["kind"] == "cut":
            assert cell["outcome"] == "n/a", cell
            assert "was not streamed" in str(cell["detail"]), cell
            continue
        assert cell["outcome"] == "survived", cell
        assert cell["detail"] == f"{calls + 1} model request(s) for {calls} call(s)", cell


def test_the_sdks_retries_absorb_a_reset(recording: Path) -> None:
    """ENGINE. A reset connection is retried by the SDK like a status."""
    done = run_cli("chaos", recording, "--json", "--kinds", "reset")
    assert done.code == 0, done.output
    assert {cell["outcome"] for cell in cells(done.stdout)} == {"survived"}, done.stdout


def test_an_agent_without_retries_crashes_at_every_call(recording: Path, tmp_path: Path) -> None:
    """ENGINE. The same agent, its SDK's retries off: a 500 at any call ends it, and
    `--fail-on crashed` turns that into exit 1; without it the map alone exits 0."""
    spec = copy(recording, tmp_path, AGENT_SDK_RETRIES="0")
    crashed = "model call 1, 500: crashed: the agent exited with code 1 after its model calls: "
    options = ("--kinds", "500", "--fail-on", "diverged,crashed")
    done = chaos_fails(spec, *options, said=("  500   CRASH", crashed))
    assert "0 survived" in done.stdout and "chaos: --fail-on crashed: occurred" in done.stderr
    assert run_cli("chaos", spec, "--kinds", "500").code == 0


def test_a_cut_stream_read_as_a_finished_answer_is_wrong_and_says_where(streaming: Path) -> None:
    """ENGINE. The SDK does not retry a stream that ended early: the agent takes the first
    chunk for the whole answer, runs no tool and exits 0; the flow fails, and the cell
    names the call. `--fail-on wrong` turns it into exit 1."""
    wrong = "model call 1, cut: wrong: the agent made 1 model call(s), the recording has 2"
    chaos_fails(streaming, "--kinds", "cut", "--fail-on", "wrong", said=("  cut   WRONG", wrong))


def test_fail_on_an_outcome_that_occurred_exits_1(recording: Path) -> None:
    done = chaos_fails(recording, "--kinds", "500", "--fail-on", "survived,hung")
    assert "chaos: --fail-on survived: occurred" in done.stderr
    summary = done.stdout.splitlines()[-1]
    assert summary.startswith("chaos: ") and " survived, 0 diverged" in summary


def test_a_flow_failing_without_faults_gets_no_cells(recording: Path, tmp_path: Path) -> None:
    spec = copy(recording, tmp_path, AGENT_MODEL="gpt-4o")  # every request diverges
    done = run_cli("chaos", spec.parent)
    assert done.code == 0, done.output
    assert "not passing without faults (failed: divergence at turn 1" in done.stdout
    assert done.stdout.splitlines()[-1] == (
        "chaos: 0 cell(s): 0 survived, 0 diverged, 0 crashed, 0 hung, 0 wrong, 0 n/a; "
        "1 flow(s) not passing without faults (no cells)"
    )
    failing = run_cli("chaos", spec.parent, "--json", "--fail-on", "not-passing")
    assert failing.code == 1 and json.loads(failing.stdout)["summary"]["not-passing"] == 1


def test_a_spec_without_a_trace_exits_2(tmp_path: Path) -> None:
    spec = write_flow(tmp_path)
    done = run_cli("chaos", spec)
    assert done.code == 2, done.output
    assert f"error: no trace at {tmp_path / 'weather.trace.yaml'}" in done.stderr
    assert "Traceback" not in done.output


def test_the_mcp_kinds_hit_each_recorded_tools_call() -> None:
    """ENGINE (MCP): the project's own MCP flow, whose agent lets an MCP error or a dead
    server end it: each cell names its call and crashed, none `never applied`."""
    spec = REPO / "specs" / "mcp.flow.yaml"
    done = run_cli("chaos", spec, "--kinds", "mcp-error,mcp-crash", "--json", cwd=REPO)
    assert done.code == 0, done.output
    found = [(cell["call"], cell["kind"], cell["outcome"]) for cell in cells(done.stdout)]
    assert found == [
        ("mcp notes call 1", "mcp-error", "crashed"),
        ("mcp notes call 2", "mcp-error", "crashed"),
        ("mcp notes call 1", "mcp-crash", "crashed"),
        ("mcp notes call 2", "mcp-crash", "crashed"),
    ], done.stdout


def test_an_agent_backing_off_past_the_timeout_hangs(tmp_path: Path) -> None:
    """ENGINE. An agent that retries a refused call after a back-off longer than the cell's
    timeout (py_retry_forever.py, AGENT_RETRY_WAIT=3600) is killed at `--timeout` and the
    cell is HUNG; `--fail-on hung` exits 1. The same agent backing off 0.2 s survives."""
    spec = write_flow(
        tmp_path,
        name="backoff",
        command=agent_command(AGENTS / "py_retry_forever.py"),
        env={"AGENT_RETRY_WAIT": "3600"},
        tools=[],
        steps=[{"prompt": "hi"}],
    )
    with FakeUpstream() as fake:
        done = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert done.code == 0, done.output
    hung = run_cli("chaos", spec, "--kinds", "500", "--timeout", "3", "--fail-on", "hung")
    assert hung.code == 1, hung.output
    assert "  500   HUNG" in hung.stdout, hung.stdout
    assert "model call 1, 500: hung: " in hung.stdout, hung.stdout
    assert " 0 survived, 0 diverged, 0 crashed, 1 hung, " in hung.stdout, hung.stdout
    assert "chaos: --fail-on hung: occurred" in hung.stderr, hung.output
    set_agent_env(spec, AGENT_RETRY_WAIT="0.2")
    # a bound far past the agent's start and one 0.2 s back-off, on a busy machine
    survived = run_cli("chaos", spec, "--kinds", "500", "--timeout", "15", "--fail-on", "hung")
    assert survived.code == 0, survived.output
    assert " 1 survived, 0 diverged, 0 crashed, 0 hung, " in survived.stdout, survived.output
