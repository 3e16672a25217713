"""Declared patterns never hold the run: a catastrophic regex beside normal flows.

`(a+)+$` against `Aaaa...a-` (41 `a`s, then a character that is no `a`) backtracks through
about 2^41 ways of splitting the run. Before the budget it ran on the event loop for good:
no other flow got its verdict, `--timeout`, SIGTERM and Ctrl-C did nothing, and only
SIGKILL ended the run. Every test here would hang on that code; each bounds the run
generously instead (a hang fails the test, a slow machine does not).
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliResult, run_cli, start_cli
from tests.e2e.flows import write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

PATHOLOGICAL = "(a+)+$"
#: The fake model calls get_weather with the capitalised word after "in ": this text.
CITY = "A" + "a" * 41 + "-"
STEPS = [{"prompt": f"Weather in {CITY}"}, {"assert_tool_call": "get_weather"}]
BOUND_S = 120  # a run that needs this long is held (each flow here takes a few seconds)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One flow recorded without patterns; every flow here replays its trace."""
    folder = tmp_path_factory.mktemp("pattern-recording")
    spec = write_flow(folder, name="base", steps=STEPS)
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 0, result.output
    return folder / "base.trace.yaml"


def _flow(folder: Path, trace: Path, name: str, **extra: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    steps = extra.pop("steps", STEPS)
    spec = write_flow(folder, name=name, steps=steps, **extra)  # type: ignore[arg-type]
    shutil.copy(trace, folder / f"{name}.trace.yaml")
    return spec


def _normalize(folder: Path, trace: Path, name: str = "normalize") -> Path:
    match = {"normalize": [{"pattern": PATHOLOGICAL, "replace": "x"}]}
    return _flow(folder, trace, name, match=match)


def _matches(folder: Path, trace: Path) -> Path:
    step = {"assert_tool_call": f"get_weather where city matches {PATHOLOGICAL}"}
    return _flow(folder, trace, "matches", steps=[STEPS[0], step])


def _line_of(spec: Path, text: str) -> int:
    return next(n for n, line in enumerate(spec.read_text().splitlines(), 1) if text in line)


def _verdict_line(stdout: str, name: str) -> str:
    return next(line for line in stdout.splitlines() if f" {name} flow" in line)


def _failed_beside_normal(result: CliResult, name: str) -> str:
    """The run exited 1, the flow `normal` passed and the flow `name` failed: its verdict."""
    assert result.code == 1, result.output
    assert _verdict_line(result.stdout, "normal").startswith("PASS: normal flow")
    stopped = _verdict_line(result.stdout, name)
    assert stopped.startswith(f"FAIL: {name} flow"), result.output
    return stopped


def test_pathological_patterns_fail_their_flows_and_the_flow_beside_them_passes(
    tmp_path: Path, recording: Path
) -> None:
    normalize = _normalize(tmp_path, recording)
    matches = _matches(tmp_path, recording)
    _flow(tmp_path, recording, "normal")
    result = run_cli("run", tmp_path, "-j", "3", timeout=BOUND_S)
    stopped = _failed_beside_normal(result, "normalize")
    where = f"declared at {normalize}:{_line_of(normalize, 'pattern:')}"
    assert (
        f"the normalize pattern `{PATHOLOGICAL}` ({where}) ran past its budget of 1 s of CPU "
        "time on the recorded request of turn 1 and was stopped. Fix: rewrite it"
    ) in stopped
    stopped = _failed_beside_normal(result, "matches")
    where = f"declared at {matches}:{_line_of(matches, 'city matches')}"
    assert (
        f"the `matches` pattern `{PATHOLOGICAL}` ({where}) ran past its budget of 1 s of CPU "
        "time on the `city` argument of a tool call and was stopped"
    ) in stopped
    assert result.stdout.splitlines()[-1] == "1 passed, 2 failed, 0 skipped"
    assert "Traceback" not in result.output


def test_a_pathological_pattern_fails_a_record_and_writes_no_trace(tmp_path: Path) -> None:
    """At record the pattern meets the agent's own request: the flow fails, nothing kept."""
    match = {"normalize": [{"pattern": PATHOLOGICAL, "replace": "x"}]}
    spec = write_flow(tmp_path, name="record", steps=STEPS, match=match)
    with FakeUpstream() as fake:
        env = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"}
        result = run_cli("record", spec, env=env, timeout=BOUND_S)
        assert fake.requests == []  # refused before forwarding: the upstream saw nothing
    assert result.code == 1, result.output
    assert f"the normalize pattern `{PATHOLOGICAL}` (declared at {spec}:" in result.output
    assert "budget of 1 s of CPU time on the agent's model request 1" in result.output
    assert not (tmp_path / "record.trace.yaml").exists()


def test_timeout_fires_beside_a_pathological_pattern(tmp_path: Path, recording: Path) -> None:
    """`--timeout` ends the hanging flow while the pattern's flow fails on its budget."""
    _normalize(tmp_path, recording)
    _flow(tmp_path, recording, "hanging", env={"AGENT_HANG_AFTER": "1"})
    result = run_cli("run", tmp_path, "-j", "2", "--timeout", "8", timeout=BOUND_S)
    assert result.code == 1, result.output
    hanging = _verdict_line(result.stdout, "hanging")
    assert "the agent did not finish within 8 s and was killed" in hanging, result.output
    assert "ran past its budget of 1 s" in _verdict_line(result.stdout, "normalize")
    assert result.stdout.splitlines()[-1] == "0 passed, 2 failed, 0 skipped"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_a_run_beside_a_pathological_pattern(
    tmp_path: Path, recording: Path, signum: int, code: int
) -> None:
    """The signal comes once both flows have been running for a while (the pattern ran
    first thing), beside a flow whose agent hangs: the run stops on it, with its exit code
    and no traceback."""
    _normalize(tmp_path, recording)
    _flow(tmp_path, recording, "hanging", env={"AGENT_HANG_AFTER": "1"})
    (tmp_path / "suite.yaml").write_text('before_each: touch "$FLOWPROOF_SPEC.started"\n')
    process = start_cli("run", tmp_path, "-j", "2")
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.started"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(3)  # the pattern has run past its budget; the other agent hangs
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=BOUND_S)
    finally:
        if process.poll() is None:  # held: the test fails, and leaves nothing running
            process.kill()
            process.communicate()
    assert process.returncode == code, stdout + stderr
    assert "Traceback" not in stderr, stderr
    assert "passed" not in stdout  # stopped: no summary


def test_the_pattern_flow_is_named_at_its_suite_line(tmp_path: Path, recording: Path) -> None:
    """A suite's pattern is named at its line in suite.yaml."""
    _flow(tmp_path, recording, "suited")
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        yaml.safe_dump({"match": {"normalize": [{"pattern": PATHOLOGICAL, "replace": "x"}]}})
    )
    result = run_cli("run", tmp_path, timeout=BOUND_S)
    assert result.code == 1, result.output
    assert f"(declared at {suite}:{_line_of(suite, 'pattern:')})" in result.output


IDENTITY_ADDON = """
class Identity:
    def flowproof_normalize(self, request, protocol):
        return request


addons = [Identity()]
"""


@pytest.mark.parametrize("where", ["recorded", "live"])
def test_a_pathological_pattern_is_budgeted_in_a_flow_with_a_matcher_addon(
    tmp_path: Path, recording: Path, where: str
) -> None:
    """A flow with a matcher addon applies its rules off the event loop; its patterns still
    run with their budget (Python's `re` holds the interpreter lock, so an unbudgeted one
    there would hold every thread, the loop and its signals with them). `recorded`: the
    pattern meets the recorded request as the flow prepares; `live`: only the agent's own
    request holds the text it cannot match."""
    (tmp_path / "identity.py").write_text(IDENTITY_ADDON)
    match = {"normalize": [{"pattern": PATHOLOGICAL, "replace": "x"}], "addons": ["identity.py"]}
    steps = STEPS
    if where == "live":  # the recording does not hold the text: only the agent's request does
        match["normalize"] = [{"pattern": "(b+)+$", "replace": "x"}]
        steps = [{"prompt": "Weather in B" + "b" * 41 + "-"}, STEPS[1]]
    spec = _flow(tmp_path, recording, "addon", match=match, steps=steps)
    _flow(tmp_path, recording, "normal")
    result = run_cli("run", tmp_path, "-j", "2", timeout=BOUND_S)
    stopped = _failed_beside_normal(result, "addon")
    assert f"(declared at {spec}:{_line_of(spec, 'pattern:')}) ran past its budget" in stopped
    assert "Traceback" not in result.output
