"""Hostile patterns: whatever regex a spec, a suite or a preset declares, its budget ends it.

Each example is a shape known to backtrack catastrophically in Python's `re` (nested or
overlapping repetition) over an atom, against a run of a character the atom matches and a
tail that may end the match or spoil it. Through the timer alone, a normalize rule over a
request, and a `matches` clause, the property is the same: the application returns, or it
is stopped with PatternBudgetExceeded naming the pattern; never a hang, never another
exception, and no timer is left armed. The bound on CPU time only catches a hang.
"""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowproof_cli.assertions import clause_matches
from flowproof_cli.match import patterns
from flowproof_cli.match.patterns import PatternBudgetExceeded, within_budget
from flowproof_cli.match.rules import MatchRules, NormalizeRule
from flowproof_cli.spec.grammar import Clause, Matcher
from tests.falsifiability.hostile_yaml import PROPERTY as FUZZ

#: Each example costs up to a budget of CPU time: fewer than the spec probes run
#: (FLOWPROOF_FUZZ_EXAMPLES raises both).
PROPERTY = settings(FUZZ, max_examples=int(os.environ.get("FLOWPROOF_FUZZ_EXAMPLES", "40")))
BUDGET_S = 0.05
HANG_S = 10.0  # CPU seconds that only a pattern no budget ended could take

#: An atom and a character it matches.
ATOMS = [("a", "a"), ("[a-c]", "b"), (r"\w", "x"), (".", "z"), (r"\d", "7"), ("[^!]", "q")]
#: Shapes that try every way of splitting a run between their repetitions.
SHAPES = [
    "({x}+)+$",
    "({x}|{x})*$",
    "({x}+)*$",
    "(?:{x}*)*$",
    "({x}*)+$",
    "(?:{x}+{x}+)+$",
    "({x}+{x}?)+$",
    "(?:{x}|{x}{x})+$",
    "(?:{x}?){{{n}}}{x}{{{n}}}$",
    "^(({x}+)*)*$",
    "(.*{x}){{10}}$",
]


@st.composite
def held(draw: st.DrawFn) -> tuple[str, str]:
    """A pathological pattern and a text it backtracks on (or, by chance, matches)."""
    atom, char = draw(st.sampled_from(ATOMS))
    run = draw(st.integers(36, 64))
    shape = draw(st.sampled_from(SHAPES))
    tail = draw(st.sampled_from(["!", "-", " ", "\n", "", char]))
    return shape.format(x=atom, n=run), char * run + tail


@pytest.fixture(autouse=True)
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns, "BUDGET_S", BUDGET_S)


def _ends(call: Any, pattern: str) -> None:
    """`call` returns or is stopped by the budget, within a bound no budget would allow."""
    started = time.process_time()
    try:
        call()
    except PatternBudgetExceeded as exc:
        assert exc.pattern == pattern
        assert f"ran past its budget of {BUDGET_S:g} s of CPU time" in str(exc)
    assert time.process_time() - started < HANG_S
    assert signal.getitimer(signal.ITIMER_VIRTUAL) == (0.0, 0.0)


@PROPERTY
@given(held())
def test_a_budget_ends_every_pathological_pattern(case: tuple[str, str]) -> None:
    pattern, text = case
    names = {"kind": "pattern", "pattern": pattern, "declared": "d", "subject": "s"}
    _ends(lambda: within_budget(lambda: re.search(pattern, text), **names), pattern)


@PROPERTY
@given(held(), st.integers(1, 4))
def test_a_budget_ends_a_normalize_rule_over_a_whole_request(
    case: tuple[str, str], copies: int
) -> None:
    pattern, text = case
    rules = MatchRules([NormalizeRule(re.compile(pattern), "x")])
    request = {"messages": [{"role": "user", "content": text}] * copies, "model": text}
    _ends(lambda: rules.matched("openai-chat", request), pattern)


@PROPERTY
@given(held())
def test_a_budget_ends_a_matches_clause(case: tuple[str, str]) -> None:
    pattern, text = case
    clause = Clause(("city",), "city", Matcher.MATCHES, pattern)
    _ends(lambda: clause_matches(clause, {"city": text}), pattern)


def test_the_shapes_are_pathological_without_a_budget() -> None:
    """The probe is worth running: each shape holds `re` far past the budget on its own
    (the shortest run the examples use, against a hundredth of a second)."""
    for shape in SHAPES:
        pattern, text = shape.format(x="a", n=36), "a" * 36 + "!"
        names = {"kind": "pattern", "pattern": pattern, "declared": "d", "subject": "s"}
        with pytest.raises(PatternBudgetExceeded):
            within_budget(lambda p=pattern, t=text: re.search(p, t), **names, budget_s=0.01)
