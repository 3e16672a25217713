"""The judge words a run from the driver's facts: the drivers write no judge messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowproof_cli.cassette import CassetteSession, Turn
from flowproof_cli.egress.report import Blocked, Containment, EgressReport
from flowproof_cli.evidence.secrets import Leak
from flowproof_cli.match.rules import MatchRules
from flowproof_cli.mode import Mode
from flowproof_cli.runner.drivers import Driven, Service
from flowproof_cli.runner.judge import Judgement, Replayed, assertions
from flowproof_cli.runner.judge import judge as judged
from flowproof_cli.runner.url_driver import TriggerOutcome
from flowproof_cli.spec import FlowSpec, parse_spec
from flowproof_cli.trace import Trace
from flowproof_cli.verdict import Failure

TURN = Turn(
    protocol="openai-chat",
    request={"model": "m", "messages": [{"role": "user", "content": "go"}]},
    status=200,
    response={"choices": [{"message": {"role": "assistant", "content": "done"}}]},
)


def judge(spec: FlowSpec, **facts: Any) -> list[str]:
    """The judgement's failures as users read them."""
    return [failure.text for failure in judged(spec, **facts).failures]


def _spec() -> FlowSpec:
    return parse_spec(
        "name: n\napp: agent\nagent: {command: python agent.py}\nsteps:\n  - prompt: go\n",
        "t.flow.yaml",
    )


def _replay() -> CassetteSession:
    return CassetteSession(Mode.REPLAY, recorded=[TURN])


def _service(status: int | None, body: str = "") -> Service:
    answer = TriggerOutcome(status=status, body=body, timed_out=False, error=None)
    return Service("http://127.0.0.1:8000/run", 18080, answer)


def test_a_command_agent_that_called_no_model_is_told_how_to_wire_it() -> None:
    failures = judge(
        _spec(), session=_replay(), driven=Driven(exit_code=0), mode=Mode.REPLAY, environ={}
    )
    assert len(failures) == 1
    message = failures[0]
    assert message.startswith("no model request reached flowproof's proxy: the agent exited 0")
    assert "; the recording has 1." in message
    assert "OPENAI_BASE_URL" in message  # the wiring hint names what was injected


def test_a_record_run_names_no_recording() -> None:
    session = CassetteSession(Mode.RECORD)
    driven = Driven(exit_code=0)
    (message,) = judge(_spec(), session=session, driven=driven, mode=Mode.RECORD, environ={})
    assert message.startswith("no model request reached flowproof's proxy")
    assert "the recording has" not in message


def test_a_service_that_answered_ok_without_a_model_call_points_elsewhere() -> None:
    driven = Driven(service=_service(200, "ok"))
    (message,) = judge(_spec(), session=_replay(), driven=driven, mode=Mode.REPLAY, environ={})
    assert message.startswith(
        "no model request reached flowproof's proxy on 127.0.0.1:18080: the service at "
        "http://127.0.0.1:8000/run answered HTTP 200 without calling a model through it "
        "(its model client points elsewhere); the recording has 1."
    )
    assert "OPENAI_BASE_URL=http://127.0.0.1:18080/v1" in message


def test_a_failing_service_answer_is_quoted_clipped() -> None:
    driven = Driven(service=_service(500, "boom " * 100))
    (message,) = judge(_spec(), session=_replay(), driven=driven, mode=Mode.REPLAY, environ={})
    assert "answered HTTP 500 without calling a model through it (it failed before" in message
    quoted = message.split("; it answered: ", 1)[1].split("...;", 1)[0]
    assert len(quoted) == 300
    assert quoted.startswith("boom boom")


def test_a_driver_failure_comes_before_the_no_request_message() -> None:
    """Red path: a crash is judged as the crash, never as a wiring problem."""
    driven = Driven(failure="the agent exited with code 3 before making any model call")
    failures = judge(_spec(), session=_replay(), driven=driven, mode=Mode.REPLAY, environ={})
    assert failures == ["the agent exited with code 3 before making any model call"]


# -- one judge: the order of every verdict, each failure with its step's line as data ------------

ASSERTING = """name: n
app: agent
agent:
  command: python agent.py
  allow_egress: [198.51.100.1:443]
steps:
  - prompt: go
  - assert: reply contains shipped
  - assert_no_egress
"""


def _asserting() -> FlowSpec:
    return parse_spec(ASSERTING, "t.flow.yaml")


def _served() -> CassetteSession:
    """A replay whose one recorded turn was served: a sound run that replied `done`."""
    session = _replay()
    session.requests = 1
    session.served.append(0)
    return session


def _leaky() -> EgressReport:
    report = EgressReport(Containment(True))
    report.add_blocked(Blocked("203.0.113.7:443", "tcp", 40))
    return report


def _leak() -> Leak:
    return Leak("STRIPE_KEY", ("turn 1 request, message 3 (tool) (raw)",), line=12)


def _replayed(flow: str = "n") -> Replayed:
    trace = Trace(flow=flow, turns=[TURN], mocks={"t": {"ok": True}})
    return Replayed(trace, Path("t.trace.yaml"), MatchRules(), "flowproof record t.flow.yaml")


def _sound_replay(**facts: Any) -> Judgement:
    """The asserting spec judged on a served replay whose agent exited 0, with `facts`."""
    return judged(
        _asserting(),
        session=_served(),
        driven=Driven(exit_code=0),
        mode=Mode.REPLAY,
        environ={},
        **facts,
    )


def test_a_sound_run_is_judged_assertions_then_egress_then_leaks_each_at_its_line() -> None:
    judgement = _sound_replay(
        egress=_leaky(),
        leaks=[_leak()],
    )
    assert [(f.message.split(":")[0], f.line, f.turn) for f in judgement.failures] == [
        ("assert reply contains shipped", 8, None),
        ("assert_no_egress", 9, None),
        ("secret ${STRIPE_KEY} leaked", 12, None),
    ]
    assert judgement.failures[1] == Failure(
        "assert_no_egress: the agent attempted 1 undeclared destination(s): "
        "tcp 203.0.113.7:443 (connect at 40ms)",
        line=9,
    )
    assert judgement.failures[1].text.endswith("(connect at 40ms) (step at line 9)")
    assert judgement.capability_error is None
    assert judgement.egress_blocked == [
        {"destination": "203.0.113.7:443", "protocol": "tcp", "at_ms": 40}
    ]
    assert judgement.containment == "egress containment: enforced (linux seccomp)"


def test_an_unsound_run_skips_the_assertions_but_not_egress_or_leaks() -> None:
    """Red path: a crash is judged as the crash; the assertions are not asserted on a run
    that never got going, while `assert_no_egress` and the leak scan still are."""
    judgement = judged(
        _asserting(),
        session=_replay(),
        driven=Driven(failure="the agent exited with code 3 before making any model call"),
        mode=Mode.REPLAY,
        environ={},
        egress=_leaky(),
        leaks=[_leak()],
    )
    assert [(f.line, f.message.split(":")[0]) for f in judgement.failures] == [
        (None, "the agent exited with code 3 before making any model call"),
        (9, "assert_no_egress"),
        (12, "secret ${STRIPE_KEY} leaked"),
    ]


def test_an_uncontained_run_cannot_certify_assert_no_egress_at_its_line() -> None:
    report = EgressReport(Containment(False, "egress containment is Linux-only"))
    judgement = _sound_replay(
        egress=report,
    )
    assert judgement.failures[-1] == Failure(
        "assert_no_egress: cannot certify: egress containment is Linux-only", line=9
    )
    assert judgement.capability_error == "egress containment is Linux-only"
    assert judgement.egress_blocked is None  # not contained: nothing this run refused
    assert judgement.notes == []  # asserted, so no allow-list warning


def test_a_failed_replay_says_what_moved_since_recording_and_a_passing_one_does_not() -> None:
    facts: dict[str, Any] = {
        "session": _served(),
        "driven": Driven(exit_code=0),
        "mode": Mode.REPLAY,
        "environ": {},
    }
    failed = judged(_asserting(), **facts, replayed=_replayed("another flow"))
    assert len(failed.notes) == 2
    assert "another flow" in failed.notes[0]
    assert failed.notes[1] == (
        "the spec's tools: mocks differ from the ones snapshotted in the trace; re-record "
        "with `flowproof record t.flow.yaml` if that change is intended"
    )
    passing = judged(_spec(), **facts, replayed=_replayed("another flow"))
    assert passing.failures == [] and passing.notes == []


def test_the_assertions_are_a_function_of_steps_and_trajectory() -> None:
    """What the per-turn judge calls once per turn: some steps against some trajectory."""
    spec = _asserting()
    trajectory = _served().trajectory()
    reply_step = [step for step in spec.steps if step.kind == "assert"]
    assert assertions(spec, reply_step, trajectory, {}) == [
        Failure(
            'assert reply contains shipped: the reply does not contain "shipped"; the reply '
            'was: "done"',
            line=8,
        )
    ]
    assert assertions(spec, [], trajectory, {}) == []
