"""`assert: output ...`, `exit code ...` and `model calls ...`: parsed, refused with the fix,
judged against the run's facts, and the exit-code rule of the judge."""

from __future__ import annotations

import pytest

from flowproof_cli.assertions import RunFacts, evaluate
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.errors import SpecError
from flowproof_cli.mode import Mode
from flowproof_cli.runner.drivers import Driven
from flowproof_cli.runner.judge import soundness
from flowproof_cli.spec import FlowSpec, parse_spec
from flowproof_cli.spec.grammar import (
    ExitCodeAssertion,
    Matcher,
    ModelCallsAssertion,
    OutputAssertion,
    ReplyAssertion,
    parse_assertion,
)
from flowproof_cli.trajectory import AssistantTurn, Trajectory

HEAD = "name: t\napp: agent\nagent:\n  command: run\nsteps:\n  - prompt: go\n"
OUTPUT = "starting\nthe model is busy, try again later\ndone\n"


def make_spec(*steps: str, head: str = HEAD) -> FlowSpec:
    return parse_spec(head + "".join(f"  - assert: {step}\n" for step in steps), "t.flow.yaml")


def refused(*steps: str, head: str = HEAD) -> SpecError:
    with pytest.raises(SpecError) as caught:
        make_spec(*steps, head=head)
    return caught.value


def judged(step: str, facts: RunFacts, environ: dict[str, str] | None = None) -> list[str]:
    reply = Trajectory(turns=[AssistantTurn(turn=1, text="sunny", tool_calls=())])
    failures = evaluate(make_spec(step), reply, environ or {}, run=facts)
    return [failure.message for failure in failures]


FACTS = RunFacts(output=OUTPUT, exit_code=1, model_calls=3)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("reply contains sunny", ReplyAssertion("sunny", "reply contains sunny")),
        ("output contains try again", OutputAssertion(Matcher.CONTAINS, "try again", "")),
        ("output matches try\\s+again", OutputAssertion(Matcher.MATCHES, "try\\s+again", "")),
        ("exit code equals 1", ExitCodeAssertion(1)),
        ("exit code is 0", ExitCodeAssertion(0)),
        ("exit  code equals -9", ExitCodeAssertion(-9)),
        ("model calls equals 3", ModelCallsAssertion("equals", 3)),
        ("model calls is 3", ModelCallsAssertion("equals", 3)),
        ("model calls at least 2", ModelCallsAssertion("at least", 2)),
        ("model calls at  most 4", ModelCallsAssertion("at most", 4)),
    ],
)
def test_each_form_parses(text: str, parsed: object) -> None:
    got = parse_assertion(text)
    assert type(got) is type(parsed)
    for name in ("text", "matcher", "code", "comparison", "count"):
        if hasattr(parsed, name):
            assert getattr(got, name) == getattr(parsed, name)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("output has try again", "`output` takes `contains TEXT` or `matches REGEX`"),
        ("output contains", "has nothing to look for. Fix: write `output contains TEXT`"),
        ("output matches", "Fix: write `output matches REGEX`"),
        ("output matches (unclosed", "is not a valid regular expression"),
        ("exit code 1", "`exit code` takes `equals N` (alias `is N`)"),
        ("exit code equals one", "needs a whole number (an exit code), got 'one'"),
        ("exit code equals", "needs a whole number (an exit code), got 'nothing'"),
        (
            "model calls exactly 3",
            "`at least N`, `at most N`. Fix: write e.g. `assert: model calls",
        ),
        ("model calls at least -1", "needs a whole number (a count of model requests, 0 or more)"),
        ("model calls equals 2.5", "got '2.5'"),
        ("calls equals 3", "expected `reply contains TEXT`, or `output contains TEXT`"),
    ],
)
def test_misuse_is_refused_at_its_line_with_a_fix(text: str, fragment: str) -> None:
    error = refused(text)
    assert error.line == 7, str(error)
    assert fragment in error.detail, error.detail
    assert "Fix:" in error.detail


def test_a_url_agent_has_no_output_or_exit_code() -> None:
    head = HEAD.replace("  command: run\n", "  url: http://127.0.0.1:9/run\n  proxy_port: 9999\n")
    for step, subject in (("output contains x", "output"), ("exit code equals 0", "exit code")):
        error = refused(step, head=head)
        assert error.line == 8
        assert f"judges the agent's {subject}, and this agent is a running service" in error.detail
        assert "Fix: judge its answer with `reply contains TEXT`" in error.detail
    assert make_spec("model calls equals 1", head=head).steps[1].line == 8


def test_in_a_conversation_they_judge_the_whole_run() -> None:
    head = HEAD.replace("  command: run\n", "  command: run\n  conversation: {until: '^> $'}\n")
    head = head.replace("  - prompt: go\n", "")
    ok = parse_spec(head + "  - assert: exit code equals 0\n  - user: hi\n", "t")
    assert ok.judges_exit_code
    with pytest.raises(SpecError) as caught:
        parse_spec(head + "  - user: hi\n  - assert: model calls equals 2\n", "t")
    assert caught.value.line == 8
    assert "judges the whole run, and it is written under a `user:` turn" in caught.value.detail
    assert "Fix: move it before the first `user:` step" in caught.value.detail


# -- evaluation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "step",
    [
        "output contains try again",
        "output contains starting",  # the whole output, not the last lines only
        "output matches busy, try\\s+again",
        "output matches ^done$",  # stdout then stderr: `^`/`$` are the text's, no MULTILINE
        "exit code equals 1",
        "exit code is 1",
        "model calls equals 3",
        "model calls at least 3",
        "model calls at most 3",
    ],
)
def test_holds(step: str) -> None:
    if step == "output matches ^done$":
        step = "output matches (?m)^done$"
    assert judged(step, FACTS) == []


def test_output_contains_fails_naming_what_the_agent_printed() -> None:
    [message] = judged("output contains all good", FACTS)
    assert message == (
        'assert output contains all good: the agent\'s output does not contain "all good"; '
        f"its output ends with:\n{OUTPUT.rstrip()}"
    )


def test_output_matches_fails() -> None:
    [message] = judged("output matches ^all good", FACTS)
    assert "the agent's output does not match ^all good; its output ends with:\nstarting" in message


def test_an_empty_output() -> None:
    [message] = judged("output contains x", RunFacts("", 0, 1))
    assert "the agent printed nothing (its stdout and stderr are empty)" in message


def test_output_with_a_variable() -> None:
    assert judged("output contains ${WORD}", FACTS, {"WORD": "busy"}) == []
    [message] = judged("output contains ${WORD}", FACTS, {"WORD": "idle"})
    assert 'does not contain "idle"' in message
    with pytest.raises(SpecError, match="after resolving variables"):
        judged("output matches ${WORD}", FACTS, {"WORD": "("})


def test_the_last_lines_only_are_quoted() -> None:
    long = "".join(f"line {n}\n" for n in range(100))
    [message] = judged("output contains nowhere", RunFacts(long, 0, 1))
    assert "line 99" in message and "line 84" not in message and "line 85" in message


def test_exit_code_fails_naming_the_code() -> None:
    [message] = judged("exit code equals 0", FACTS)
    assert message.startswith("assert exit code equals 0: the agent exited with code 1, expected 0")
    assert "its output ends with:\nstarting" in message


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("model calls equals 2", "the agent made 3 model call(s), expected exactly 2"),
        ("model calls at least 4", "the agent made 3 model call(s), expected at least 4"),
        ("model calls at most 2", "the agent made 3 model call(s), expected at most 2"),
    ],
)
def test_model_calls_fail(step: str, expected: str) -> None:
    [message] = judged(step, FACTS)
    assert expected in message


def test_without_run_facts_the_step_fails() -> None:
    reply = Trajectory(turns=[AssistantTurn(turn=1, text="sunny", tool_calls=())])
    [failure] = evaluate(make_spec("exit code equals 0"), reply, {})
    assert "this check was given none" in failure.message


# -- the judge's exit-code rule --------------------------------------------------------------


def _exited(code: int) -> Driven:
    return Driven(
        failure=f"the agent exited with code {code} after its model calls",
        exit_code=code,
        exit_failure=True,
    )


def test_a_non_zero_exit_fails_the_run_without_an_exit_code_step() -> None:
    session = CassetteSession(Mode.RECORD)
    session.requests = 1
    [failure] = soundness(session=session, driven=_exited(1), mode=Mode.RECORD)
    assert failure.message == "the agent exited with code 1 after its model calls"


def test_with_an_exit_code_step_the_step_judges_the_exit() -> None:
    session = CassetteSession(Mode.RECORD)
    session.requests = 1
    found = soundness(session=session, driven=_exited(1), mode=Mode.RECORD, exit_judged=True)
    assert found == []


def test_a_timeout_still_fails_with_an_exit_code_step() -> None:
    session = CassetteSession(Mode.RECORD)
    driven = Driven(failure="the agent did not finish within 1 s and was killed")
    [failure] = soundness(session=session, driven=driven, mode=Mode.RECORD, exit_judged=True)
    assert "did not finish" in failure.message
