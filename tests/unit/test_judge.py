"""The judge words a run from the driver's facts: the drivers write no judge messages."""

from __future__ import annotations

from flowproof_cli.cassette import CassetteSession, Turn
from flowproof_cli.mode import Mode
from flowproof_cli.runner.drivers import Driven, Service
from flowproof_cli.runner.judge import judge
from flowproof_cli.runner.url_driver import TriggerOutcome
from flowproof_cli.spec import FlowSpec, parse_spec

TURN = Turn(
    protocol="openai-chat",
    request={"model": "m", "messages": [{"role": "user", "content": "go"}]},
    status=200,
    response={"choices": [{"message": {"role": "assistant", "content": "done"}}]},
)


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
