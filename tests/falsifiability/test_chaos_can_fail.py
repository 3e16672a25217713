"""`flowproof chaos` can say anything but `survived`: a cell is survived only when its replay
passed, whatever else its result holds, and every other outcome is reached by the result
that should reach it. A sweep whose cells were all `ok` therefore means every replay passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flowproof_cli.faults.plan import ANSWER, CallAt, Fault
from flowproof_cli.runner import chaos
from flowproof_cli.verdict import Failure, FlowResult

FAULT = Fault(CallAt("model", 2), ANSWER, 429, retry_after=0.05)
OTHER = Fault(CallAt("model", 1), ANSWER, 500)

results = st.fixed_dictionaries(
    {
        "failures": st.lists(
            st.sampled_from(["reply does not contain x", "timed out"]), max_size=2
        ),
        "error": st.none() | st.just("could not run"),
        "agent_exit_code": st.none() | st.integers(-9, 3),
        "divergence": st.none() | st.just({"summary": "turn 2: model changed"}),
        "duration_s": st.floats(0, 120),
        "faults": st.lists(
            st.fixed_dictionaries(
                {
                    "fault": st.sampled_from([FAULT.label, OTHER.label]),
                    "not_applicable": st.none() | st.just("not streamed"),
                }
            ),
            max_size=2,
        ),
    }
)


def result(values: dict[str, Any]) -> FlowResult:
    flow = FlowResult("f", Path("f.flow.yaml"), "replay", Path("f.trace.yaml"))
    flow.failures = [Failure(text) for text in values["failures"]]
    flow.error = values["error"]
    flow.agent_exit_code = values["agent_exit_code"]
    flow.divergence = values["divergence"]
    flow.duration_s = values["duration_s"]
    flow.faults = values["faults"]
    return flow


@settings(max_examples=300, deadline=None)
@given(results)
def test_survived_only_when_the_replay_passed(values: dict[str, Any]) -> None:
    flow = result(values)
    outcome, _ = chaos.classify(flow, FAULT, 60.0)
    assert outcome in chaos.OUTCOMES
    if outcome == chaos.SURVIVED:
        assert flow.passed
    if flow.passed and outcome != chaos.NOT_APPLICABLE:
        assert outcome == chaos.SURVIVED


def test_each_outcome_is_reached() -> None:
    """The red paths, one each (a classifier that said `survived` to all would pass the
    property above only for passing replays: these fail it)."""
    cases = {
        chaos.DIVERGED: {"divergence": {"summary": "x"}, "failures": [Failure("d")]},
        chaos.CRASHED: {"agent_exit_code": 1, "failures": [Failure("exited")]},
        chaos.HUNG: {"failures": [Failure("the agent did not finish within 5 s and was killed")]},
        chaos.WRONG: {"agent_exit_code": 0, "failures": [Failure("reply does not contain x")]},
        chaos.NOT_APPLICABLE: {"faults": [{"fault": FAULT.label, "not_applicable": "no stream"}]},
    }
    for expected, values in cases.items():
        flow = FlowResult("f", Path("f.flow.yaml"), "replay", Path("f.trace.yaml"))
        for name, value in values.items():
            setattr(flow, name, value)
        assert chaos.classify(flow, FAULT, 5.0)[0] == expected, values
