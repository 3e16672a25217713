"""Every verdict form of a flow's faults can FAIL, and its twin (the one change undone)
passes.

One flow (tests/e2e/fault_agents/py_openai_resilient.py: the openai SDK with its default
retries, a weather tool loop) is recorded once with a 429 at its first model call; each
case is a copy with one change to the spec, the agent or the trace, replayed offline. A case
states its exit code and a fragment of the failure."""

from __future__ import annotations

import copy
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import computed_once, run_cli
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AGENT = Path(__file__).resolve().parents[1] / "e2e" / "fault_agents" / "py_openai_resilient.py"
RATE_LIMIT = {"at": "model call 1", "answer": 429, "retry_after": 0.05}
STEPS = [
    {"prompt": "What's the weather in Nairobi right now? Use both tools."},
    {"assert_tool_call": "get_weather where city equals Nairobi"},
    {"assert": "model calls equals 3"},
]


def spec(faults: list[dict[str, Any]], **agent_env: str) -> dict[str, Any]:
    agent = {"command": f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"}
    if agent_env:
        agent["env"] = agent_env  # type: ignore[assignment]
    return {
        "name": "faulted weather",
        "app": "agent",
        "agent": agent,
        "faults": faults,
        "steps": STEPS,
    }


TraceEdit = Callable[[dict[str, Any]], None]


def _faults_everywhere(faults: list[dict[str, Any]], section: list[dict[str, Any]]) -> TraceEdit:
    """The spec's faults, and the trace recorded with them (so the two agree)."""

    def edit(trace: dict[str, Any]) -> None:
        trace["faults"] = section

    return edit


def _never_retried(trace: dict[str, Any]) -> None:
    """The recording as if the agent had given up on the 429: the call's turn holds only the
    fault's answer."""
    first = trace["turns"][0]
    first["response"] = {"status": 429, "body": {"flowproof_fault": "answer: 429"}}


@dataclass(frozen=True)
class Case:
    code: int
    message: str
    faults: list[dict[str, Any]] = field(default_factory=lambda: [RATE_LIMIT])
    agent_env: dict[str, str] = field(default_factory=dict)
    trace: TraceEdit | None = None


NEVER = {"at": "model call 9", "answer": 429}
CUT = {"at": "model call 1", "stream": "cut after 1 chunks"}
CASES: dict[str, Case] = {
    "fault-never-applied": Case(
        1,
        "the fault `model call 9: answer: 429` never applied: its call never came (the agent "
        "made 2 distinct model call(s) there)",
        faults=[NEVER],
        trace=_faults_everywhere([NEVER], [{"at": "model call 9", "kind": "answer", "value": 429}]),
    ),
    "fault-could-not-apply": Case(
        1,
        "the fault `model call 1: stream: cut after 1 chunks` could not apply: model call 1 "
        "was not streamed",
        faults=[CUT],
        trace=_faults_everywhere([CUT], [{"at": "model call 1", "kind": "cut", "value": 1}]),
    ),
    "recorded-with-other-faults": Case(
        2,
        "case.trace.yaml was recorded with other faults than the spec's (recorded: model call 1: answer: 429, "
        "retry_after: 0.05; the spec's: model call 1: answer: 500)",
        faults=[{"at": "model call 1", "answer": 500}],
    ),
    "retried-where-the-recording-did-not": Case(
        1,
        "turn 1: the agent retried the faulted call (model call 1: answer: 429, retry_after: 0.05); "
        "when recorded it did not retry",
        trace=_never_retried,
    ),
    "faulted-request-changed": Case(
        1, "divergence at turn 1: model changed", agent_env={"AGENT_MODEL": "gpt-4o"}
    ),
    "sdk-gives-up-on-the-fault": Case(
        1, "RateLimitError: Error code: 429", agent_env={"AGENT_RETRIES": "0"}
    ),
}
TWIN = "base.twin"


def _recorded(folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.flow.yaml").write_text(yaml.safe_dump(spec([RATE_LIMIT]), sort_keys=False))
    with FakeUpstream() as fake:
        env = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "OPENAI_API_KEY": "sk-x"}
        result = run_cli("record", folder / "base.flow.yaml", env=env, cwd=folder)
    assert result.code == 0, result.output
    return yaml.safe_load((folder / "base.trace.yaml").read_text())


def _case(root: Path, name: str, trace: dict[str, Any], case: Case | None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    document = spec([RATE_LIMIT]) if case is None else spec(case.faults, **case.agent_env)
    (folder / "case.flow.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    edited = copy.deepcopy(trace)
    if case is not None and case.trace is not None:
        case.trace(edited)
    (folder / "case.trace.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    return folder


def _all_cases(root: Path) -> dict[str, list[Any]]:
    trace = _recorded(root / "base")
    found: dict[str, list[Any]] = {}
    for name, case in [*CASES.items(), (TWIN, None)]:
        folder = _case(root / "cases", name, trace, case)
        result = run_cli("run", folder / "case.flow.yaml", cwd=folder)
        found[name] = [result.code, result.output]
    return found


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    root = tmp_path_factory.mktemp("fault-cases")
    found: dict[str, list[Any]] = computed_once(
        tmp_path_factory, "fault-cases", lambda: _all_cases(root)
    )
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_case_fails_with_its_message(name: str, verdicts: dict[str, list[Any]]) -> None:
    code, output = verdicts[name]
    assert code == CASES[name].code, output
    assert CASES[name].message in output, output


def test_the_twin_of_every_case_passes(verdicts: dict[str, list[Any]]) -> None:
    code, output = verdicts[TWIN]
    assert code == 0, output
