"""After a replay's first divergence the verdict is settled: an agent that goes on retrying
the refusal (ignoring `x-should-retry: false`) is stopped after a short grace, instead of
holding the run to its timeout; `--keep-going` lets it run to its own end."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flowproof_cli.verdict import Failure
from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, agent_command, set_agent_env, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AGENT = AGENTS / "py_retry_forever.py"
TIMEOUT_S = 60  # the spec's: what an unstopped agent holds the run to
#: Well under the timeout, far over grace + kill grace + start-up: a stopped agent ends the
#: run before it, an unstopped one cannot, however loaded the machine (no timing is judged).
STOPPED_BY_S = TIMEOUT_S / 2
STOPPED = (
    "note: agent stopped 2 s after the divergence (more requests cannot change the verdict; "
    "--keep-going to let it run)"
)
DIVERGED = "divergence at turn 1: model changed: recorded gpt-4o-mini, replayed gpt-4o"


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recorded")
    spec = write_flow(
        folder, name="retry", command=agent_command(AGENT), tools=[], steps=[{"prompt": "hi"}]
    )
    text = spec.read_text() + f"timeout: {TIMEOUT_S}\n"
    spec.write_text(text)
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 0, result.output
    return folder


@pytest.fixture
def diverging(recording: Path, tmp_path: Path) -> Path:
    """A copy whose agent now asks for another model: every request diverges."""
    spec = shutil.copytree(recording, tmp_path / "flows") / "retry.flow.yaml"
    set_agent_env(spec, AGENT_MODEL="gpt-4o")
    return spec


def test_a_retrying_agent_is_stopped_after_the_grace(diverging: Path) -> None:
    result = run_cli("run", diverging, "--json", timeout=TIMEOUT_S)
    assert result.code == 1, result.output
    (flow,) = json.loads(result.stdout)["flows"]
    assert [Failure.from_json(failure).text for failure in flow["failures"]] == [DIVERGED]
    assert flow["divergence"]["summary"].startswith("turn 1: model changed")
    assert flow["duration_s"] < STOPPED_BY_S, flow
    assert flow["agent_exit_code"] is None
    assert "attempt 2: HTTP 409, retrying" in flow["stdout_tail"]  # it did go on, a while
    assert STOPPED.removeprefix("note: ") in flow["notes"]

    text = run_cli("run", diverging)
    assert text.code == 1
    assert text.stdout.startswith(f"FAIL: retry flow - {DIVERGED}\n"), text.stdout
    assert f"    {STOPPED}\n" in text.stdout


def test_one_that_ignores_sigterm_too_and_a_directory_run(diverging: Path) -> None:
    """Stopped the way a timeout stops it: SIGTERM, then SIGKILL to its whole group. The
    JUnit XML carries the divergence."""
    set_agent_env(diverging, AGENT_IGNORE_TERM="1")
    result = run_cli("run", diverging.parent, timeout=TIMEOUT_S)
    assert result.code == 1, result.output
    assert f"    {STOPPED}\n" in result.stdout
    seconds = float(result.stdout.split("FAIL: retry flow (")[1].split("s)")[0])
    assert seconds < STOPPED_BY_S, result.stdout
    junit = ET.parse(diverging.parent / ".flowproof" / "suite-junit.xml").getroot()
    (failure,) = junit.iter("failure")
    assert failure.get("message") == DIVERGED


def test_keep_going_lets_it_run_to_its_end(diverging: Path) -> None:
    result = run_cli("run", diverging, "--keep-going", "--timeout", "5", "--json")
    assert result.code == 1, result.output
    (flow,) = json.loads(result.stdout)["flows"]
    assert [Failure.from_json(failure).text for failure in flow["failures"]] == [
        DIVERGED
    ]  # the divergence explains the timeout after it
    assert flow["duration_s"] >= 5
    assert not any("agent stopped" in note for note in flow["notes"])
