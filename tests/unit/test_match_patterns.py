"""Declared patterns under a CPU-time budget: the timer, the rules, the session, `matches`.

`(a+)+$` against 41 `a`s and a `-` backtracks through about 2^41 splits; without the budget
each of these tests would run for days. Budgets here are small (a tenth of a second) so the
pathological cases end fast; no test asserts a time, only that the budget ended the pattern.
"""

from __future__ import annotations

import json
import re
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.assertions import evaluate
from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.match import patterns
from flowproof_cli.match.build import Declared, build_rules, snapshot_rules
from flowproof_cli.match.patterns import (
    BadPattern,
    PatternBudgetExceeded,
    compile_pattern,
    within_budget,
)
from flowproof_cli.match.presets import NormalizeEntry
from flowproof_cli.match.rules import MatchRules, NormalizeRule, summarize
from flowproof_cli.spec.loader import parse_spec
from flowproof_cli.spec.suite import parse_suite
from flowproof_cli.trajectory import AssistantTurn, ToolCall, Trajectory

CHAT = "openai-chat"
PATHOLOGICAL = "(a+)+$"
HELD = "A" + "a" * 41 + "-"  # the run of `a`s, then a character that is no `a`


@pytest.fixture(autouse=True)
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns, "BUDGET_S", 0.1)


def _stuck() -> bool:
    return re.search(PATHOLOGICAL, HELD) is not None


def _apply(call: Any, **where: str) -> Any:
    names = {"kind": "normalize pattern", "pattern": PATHOLOGICAL, "declared": "d", "subject": "s"}
    return within_budget(call, **(names | where))


# -- the timer -----------------------------------------------------------------------------------


def test_a_pattern_within_its_budget_returns_its_result_and_leaves_no_timer() -> None:
    assert _apply(lambda: re.sub("a+", "x", "caaab")) == "cxb"
    assert signal.getitimer(signal.ITIMER_VIRTUAL) == (0.0, 0.0)


def test_a_pathological_pattern_is_stopped_and_named() -> None:
    with pytest.raises(PatternBudgetExceeded) as caught:
        _apply(_stuck, declared="declared at x.flow.yaml:7", subject="the recorded request")
    assert str(caught.value).startswith(
        "the normalize pattern `(a+)+$` (declared at x.flow.yaml:7) ran past its budget of "
        "0.1 s of CPU time on the recorded request and was stopped. Fix: rewrite it"
    )
    assert (caught.value.pattern, caught.value.budget_s) == (PATHOLOGICAL, 0.1)
    assert signal.getitimer(signal.ITIMER_VIRTUAL) == (0.0, 0.0)


def test_the_budget_is_per_application() -> None:
    """A second application gets a whole budget of its own, and is stopped again."""
    for _ in range(2):
        with pytest.raises(PatternBudgetExceeded):
            _apply(_stuck)
    assert _apply(lambda: "after") == "after"


def test_a_long_pattern_is_shortened_in_the_message() -> None:
    with pytest.raises(PatternBudgetExceeded) as caught:
        _apply(_stuck, pattern="x" * 200)
    assert f"`{'x' * 77}...`" in str(caught.value)


def test_a_nested_application_runs_under_the_outer_budget() -> None:
    with pytest.raises(PatternBudgetExceeded) as caught:
        _apply(lambda: _apply(_stuck, declared="inner"), declared="outer")
    assert "(outer)" in str(caught.value)


def test_another_users_timer_and_handler_are_kept() -> None:
    """A timer someone else armed is re-armed afterwards; its tick reaches their handler."""
    ticks: list[int] = []
    previous = signal.signal(signal.SIGVTALRM, lambda signum, frame: ticks.append(signum))
    try:
        signal.setitimer(signal.ITIMER_VIRTUAL, 50.0)
        assert _apply(lambda: 1) == 1
        remaining, _ = signal.getitimer(signal.ITIMER_VIRTUAL)
        assert remaining > 40  # re-armed (to about what it had left)
        signal.setitimer(signal.ITIMER_VIRTUAL, 0.01)
        while not ticks:  # burn CPU until the other user's tick comes
            sum(range(10_000))
        assert ticks == [signal.SIGVTALRM]
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def test_off_the_main_thread_a_pattern_runs_without_a_budget() -> None:
    """Signals reach the main thread only: elsewhere the call runs as it is, no timer."""
    seen: list[object] = []

    def work() -> None:
        seen.append(_apply(lambda: signal.getitimer(signal.ITIMER_VIRTUAL)))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    assert seen == [(0.0, 0.0)]


def test_a_thread_handed_to_a_loop_has_its_patterns_budgeted_there() -> None:
    """A worker a loop on the main thread awaits (a flow with matcher addons applies its
    rules in one) hands each application back: it runs on the main thread, with the timer,
    and the budget's failure reaches the worker."""
    import asyncio

    seen: list[object] = []

    def work(loop: asyncio.AbstractEventLoop) -> None:
        with patterns.handed_to(loop):
            seen.append(_apply(lambda: threading.current_thread() is threading.main_thread()))
            try:
                _apply(_stuck)
            except PatternBudgetExceeded as exc:
                seen.append(exc.pattern)

    async def main() -> None:
        await asyncio.to_thread(work, asyncio.get_running_loop())

    asyncio.run(main())
    assert seen == [True, PATHOLOGICAL]


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("(" * 1200 + ")" * 1200, "nested too deeply"),
        ("a{99999999999}", "the repetition number is too large"),
        ("(a", "missing ), unterminated subpattern"),
    ],
)
def test_every_refusal_of_re_is_one_bad_pattern(pattern: str, problem: str) -> None:
    with pytest.raises(BadPattern, match=re.escape(problem)):
        compile_pattern(pattern)


# -- normalize rules and the session ------------------------------------------------------------


def _request(text: str = HELD) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


def _rules(origin: str = "spec", declared: str | None = "x.flow.yaml:9") -> MatchRules:
    return MatchRules([NormalizeRule(re.compile(PATHOLOGICAL), "x", None, origin, declared)])


@pytest.mark.parametrize(
    ("origin", "declared", "said"),
    [
        ("spec", "x.flow.yaml:9", "(declared at x.flow.yaml:9)"),
        ("suite", None, "(from the suite's match block)"),
        ("preset dates", None, "(from preset dates)"),
    ],
)
def test_a_normalize_rule_names_where_it_was_declared(
    origin: str, declared: str | None, said: str
) -> None:
    with pytest.raises(PatternBudgetExceeded, match=re.escape(said)):
        _rules(origin, declared).matched(CHAT, _request(), subject="request 1")


def test_after_a_stopped_pattern_every_request_fails_at_once() -> None:
    """The verdict is settled: later requests (an SDK's retries) do not run it again."""
    rules = _rules()
    with pytest.raises(PatternBudgetExceeded, match="on request 1 and"):
        rules.matched(CHAT, _request(), subject="request 1")
    rules.rules.clear()  # nothing left to run: the failure comes from what was settled
    rules.usage.clear()
    with pytest.raises(PatternBudgetExceeded, match="on request 1 and"):
        rules.matched(CHAT, _request("fine"), subject="request 2")


def test_a_stopped_rule_is_not_reported_as_unused() -> None:
    rules = _rules()
    with pytest.raises(PatternBudgetExceeded):
        rules.matched(CHAT, _request())
    assert summarize(rules) == []
    assert rules.report()[0].to_json()["unused"] is False


def test_a_pattern_stopped_on_the_recorded_side_fails_the_replay() -> None:
    recorded = Turn(CHAT, _request(), 200, {"choices": []})
    session = CassetteSession(Mode.REPLAY, recorded=[recorded], rules=_rules())
    (message,) = session.errors  # before any request: the flow fails whatever the agent does
    assert "on the recorded request of turn 1 and was stopped" in message
    answer = session.on_request("/v1/chat/completions", json.dumps(_request("hi")).encode())
    assert getattr(answer, "status", None) == 500
    assert set(session.errors) == {message}  # the same failure: once in the verdict


def test_a_pattern_stopped_on_the_agents_request_is_refused_naming_it() -> None:
    session = CassetteSession(Mode.RECORD, rules=_rules())
    answer = session.on_request("/v1/chat/completions", json.dumps(_request()).encode())
    assert getattr(answer, "status", None) == 500
    body = json.loads(getattr(answer, "body", b"{}"))
    assert "on the agent's model request 1 and was stopped" in body["error"]["message"]
    assert session.errors == [f"flowproof: {session.rules.exceeded}"]


def test_snapshot_rules_name_the_trace_they_came_from() -> None:
    entry = {"normalize": {"pattern": PATHOLOGICAL, "replace": "x"}, "from": "preset dates"}
    rebuilt = snapshot_rules([entry], "w.trace.yaml")
    with pytest.raises(PatternBudgetExceeded) as caught:
        MatchRules(rebuilt.rules).matched(CHAT, _request())
    assert "(declared at w.trace.yaml (the trace's `match:` snapshot, from preset dates))" in str(
        caught.value
    )


def test_a_declared_entry_keeps_its_line_through_a_worker() -> None:
    """A suite's block reaches a worker as JSON: the line comes along."""
    entry = NormalizeEntry(PATHOLOGICAL, "x", None, "flows/suite.yaml:4")
    block = Declared.from_json(Declared("suite", normalize=(entry,)).to_json())
    rules, _ = build_rules([block], cwd=Path("."), home=None)
    with pytest.raises(PatternBudgetExceeded, match=re.escape("(declared at flows/suite.yaml:4)")):
        rules.matched(CHAT, _request())


# -- where a spec or a suite declared it ---------------------------------------------------------

SPEC = """name: held
app: agent
agent: {command: "true"}
steps:
  - prompt: hi
  - assert_tool_call: get_weather where city matches (a+)+$
match:
  normalize:
    - replace: x
      pattern: '(a+)+$'
    - {pattern: b, replace: c}
"""


def test_a_spec_names_each_normalize_pattern_at_its_line() -> None:
    spec = parse_spec(SPEC, "flows/held.flow.yaml")
    assert spec.match is not None
    declared = spec.match.declared(Path("flows"), "spec")
    where = [entry.declared for entry in declared.normalize]
    assert where == ["flows/held.flow.yaml:10", "flows/held.flow.yaml:11"]


def test_a_suite_names_each_normalize_pattern_at_its_line() -> None:
    suite = parse_suite(
        "env: {A: b}\nmatch:\n  normalize:\n  - {pattern: x, replace: y}\n", "s.yaml"
    )
    assert suite.match is not None
    assert [e.declared for e in suite.match.declared(Path("."), "suite").normalize] == ["s.yaml:4"]


@pytest.mark.parametrize("pattern", ["'" + "(" * 1200 + ")" * 1200 + "'", "'a{99999999999}'"])
def test_a_pattern_re_cannot_compile_is_a_spec_error_at_its_line(pattern: str) -> None:
    """Was a RecursionError or OverflowError traceback (exit 1)."""
    text = SPEC.replace("'(a+)+$'", pattern)
    with pytest.raises(Exception) as caught:
        parse_spec(text, "flows/held.flow.yaml")
    assert type(caught.value).__name__ == "SpecError"
    assert str(caught.value).startswith("flows/held.flow.yaml:10: `pattern` is not a valid")


def test_a_matches_clause_past_its_budget_fails_its_step_and_stops_evaluating() -> None:
    spec = parse_spec(
        SPEC.replace("  - prompt: hi\n", "  - prompt: hi\n  - assert: reply contains never\n"),
        "flows/held.flow.yaml",
    )
    call = ToolCall("get_weather", json.dumps({"city": HELD}), turn=1)
    turns = [AssistantTurn(1, None, (call,)), AssistantTurn(2, "done", ())]
    failures = evaluate(spec, Trajectory(turns), {})
    assert [failure.step_line for failure in failures] == [6, 7]  # the reply, then `matches`
    assert failures[1].message.startswith(
        "assert_tool_call get_weather where city matches (a+)+$: the `matches` pattern "
        "`(a+)+$` (declared at flows/held.flow.yaml:7) ran past its budget of 0.1 s of CPU "
        "time on the `city` argument of a tool call and was stopped"
    )
