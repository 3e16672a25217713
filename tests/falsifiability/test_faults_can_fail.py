"""Every verdict form of a flow's faults can FAIL, and its twin (the one change undone)
passes.

One flow (tests/e2e/fault_agents/py_openai_resilient.py: the openai SDK with its default
retries, a weather tool loop) is recorded once with a 429 at its first model call; each
case is a copy with one change to the spec, the agent or the trace, replayed offline. A case
states its exit code and a fragment of the failure."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.falsifiability.twin_runs import (
    FaultCase,
    TraceEdit,
    replay_cases,
    verdict_tests,
    verdicts_fixture,
)

pytestmark = pytest.mark.slow

AGENT = Path(__file__).resolve().parents[1] / "e2e" / "fault_agents" / "py_openai_resilient.py"
RATE_LIMIT = {"at": "model call 1", "answer": 429, "retry_after": 0.05}
STEPS = [
    {"prompt": "What's the weather in Nairobi right now? Use both tools."},
    {"assert_tool_call": "get_weather where city equals Nairobi"},
    {"assert": "model calls equals 3"},
]


def spec(faults: list[dict[str, Any]] | None, **agent_env: str) -> dict[str, Any]:
    """The flow with `faults` (None: the base flow's, a 429 at the first model call)."""
    agent = {"command": f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"}
    if agent_env:
        agent["env"] = agent_env  # type: ignore[assignment]
    return {
        "name": "faulted weather",
        "app": "agent",
        "agent": agent,
        "faults": [RATE_LIMIT] if faults is None else faults,
        "steps": STEPS,
    }


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


NEVER = {"at": "model call 9", "answer": 429}
CUT = {"at": "model call 1", "stream": "cut after 1 chunks"}
CASES: dict[str, FaultCase] = {
    "fault-never-applied": FaultCase(
        1,
        "the fault `model call 9: answer: 429` never applied: its call never came (the agent "
        "made 2 distinct model call(s) there)",
        faults=[NEVER],
        trace=_faults_everywhere([NEVER], [{"at": "model call 9", "kind": "answer", "value": 429}]),
    ),
    "fault-could-not-apply": FaultCase(
        1,
        "the fault `model call 1: stream: cut after 1 chunks` could not apply: model call 1 "
        "was not streamed",
        faults=[CUT],
        trace=_faults_everywhere([CUT], [{"at": "model call 1", "kind": "cut", "value": 1}]),
    ),
    "recorded-with-other-faults": FaultCase(
        2,
        "case.trace.yaml was recorded with other faults than the spec's (recorded: model call 1: answer: 429, "
        "retry_after: 0.05; the spec's: model call 1: answer: 500)",
        faults=[{"at": "model call 1", "answer": 500}],
    ),
    "retried-where-the-recording-did-not": FaultCase(
        1,
        "turn 1: the agent retried the faulted call (model call 1: answer: 429, retry_after: 0.05); "
        "when recorded it did not retry",
        trace=_never_retried,
    ),
    "faulted-request-changed": FaultCase(
        1, "divergence at turn 1: model changed", agent_env={"AGENT_MODEL": "gpt-4o"}
    ),
    "sdk-gives-up-on-the-fault": FaultCase(
        1, "RateLimitError: Error code: 429", agent_env={"AGENT_RETRIES": "0"}
    ),
}


def _all_cases(root: Path) -> dict[str, list[Any]]:
    cases = {
        name: (spec(case.faults, **case.agent_env), case.trace) for name, case in CASES.items()
    }
    return replay_cases(root, spec([RATE_LIMIT]), cases)


verdicts = verdicts_fixture("fault-cases", _all_cases)

test_the_case_fails_with_its_message, test_the_twin_of_every_case_passes = verdict_tests(CASES)
