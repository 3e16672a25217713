"""`match learn`'s `Verified` can fail: each learned rule is needed, and the check notices.

Two runs whose requests differ in their paths, a date, a UUID, a number after fixed text
and a field no shape covers. The learned rules verify; without any one of them the same
check finds the difference it removed, at its path, and the command would end 1.
"""

from __future__ import annotations

import dataclasses

import pytest

from flowproof_cli.cassette.learn import Learned, Place, learn_rules, verify
from flowproof_cli.cassette.turn import Turn

ONE = Place("/tmp/learn/one/home/work/app", "/tmp/learn/one/home")
TWO = Place("/tmp/learn/two/ci/app", "/tmp/learn/two/home")


def _run(place: Place, date: str, session: str, started: int, mood: str) -> list[Turn]:
    system = f"In {place.cwd} on {date}. Turn started at: {started} ms."
    request = {
        "model": "m",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        "metadata": {"session": session, "mood": mood},
    }
    return [Turn("openai-chat", request, 200, {"choices": []})]


FIRST = _run(ONE, "2026-12-04", "6f1c2a3b-1d2e-4f50-9a8b-7c6d5e4f3a2b", 1733312345678, "calm")
SECOND = _run(TWO, "2027-01-06", "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d", 1736312349999, "blue")


@pytest.fixture(scope="module")
def learned() -> Learned:
    found = learn_rules(FIRST, SECOND, (ONE, TWO))
    assert found.verified, found.remaining
    return found


def _left(learned: Learned) -> list[str]:
    return [d.change.path for d in verify(learned, FIRST, SECOND, (ONE, TWO)) if d.change]


def test_the_rules_learned_are_the_ones_expected(learned: Learned) -> None:
    assert learned.relocate is not None
    assert sorted(rule.kind for rule in learned.normalize) == ["date (ISO 8601)", "number", "uuid"]
    assert [rule.path for rule in learned.ignore] == ["metadata.mood"]


def test_without_relocation_the_paths_differ(learned: Learned) -> None:
    assert _left(dataclasses.replace(learned, relocate=None)) == ["messages.0.content"]


@pytest.mark.parametrize("kind", ["date (ISO 8601)", "number", "uuid"])
def test_without_each_normalize_rule_its_span_differs(learned: Learned, kind: str) -> None:
    kept = [rule for rule in learned.normalize if rule.kind != kind]
    (rule,) = [rule for rule in learned.normalize if rule.kind == kind]
    assert _left(dataclasses.replace(learned, normalize=kept)) == [rule.at]


def test_without_the_ignore_the_field_differs(learned: Learned) -> None:
    assert _left(dataclasses.replace(learned, ignore=[])) == ["metadata.mood"]


def test_a_rule_at_another_path_does_not_reach(learned: Learned) -> None:
    moved = [dataclasses.replace(rule, at="messages.1.content") for rule in learned.normalize]
    assert set(_left(dataclasses.replace(learned, normalize=moved))) == {
        "messages.0.content",
        "metadata.session",
    }
