"""`flowproof match learn`'s inference: two runs' requests in, the narrowest rules out, checked.

Pure functions over request bodies (cassette/learn.py, match/shapes.py) and the text the
command prints (cli/learn.py); the two real runs are tests/e2e/test_match_learn.py.
"""

from __future__ import annotations

import copy
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.cassette.learn import (
    Learned,
    Place,
    differing_spans,
    learn_rules,
    verify,
)
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.cli.learn import learned_json, learned_text
from flowproof_cli.match.shapes import DATES, literal, shape_of
from flowproof_cli.runner.learn import Dating, LearnRun, faketime_dating
from flowproof_cli.verdict import Failure, FlowResult

CHAT = "openai-chat"
ONE = Place("/tmp/learn/one/home/work/app", "/tmp/learn/one/home")
TWO = Place("/tmp/learn/two/ci/app", "/tmp/learn/two/home")


def request(system: str, *, user: str = "Weather in Nairobi?", **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        **extra,
    }


def turns(*requests: dict[str, Any], answers: list[Any] | None = None) -> list[Turn]:
    answers = answers or [{"choices": []}] * len(requests)
    return [Turn(CHAT, r, 200, a) for r, a in zip(requests, answers, strict=True)]


def learn(first: dict[str, Any], second: dict[str, Any], places: Any = None) -> Learned:
    return learn_rules(turns(first), turns(second), places)


def rules(learned: Learned) -> dict[str, Any]:
    return learned.match_json()


# -- spans and shapes -------------------------------------------------------------------------


def test_spans_are_aligned_on_words() -> None:
    first, second = "date 2026-12-04 ok", "date 2027-01-06 ok"
    spans = differing_spans(first, second)
    assert [first[a0:a1] for a0, a1, _, _ in spans] == ["2026", "12", "04"]
    assert [second[b0:b1] for _, _, b0, b1 in spans] == ["2027", "01", "06"]


def test_an_insertion_is_a_point_on_the_other_side() -> None:
    ((a0, a1, b0, b1),) = differing_spans("ab cd", "ab xx cd")
    assert (a0, a1) == (3, 3) and "ab xx cd"[b0:b1] == "xx "


@pytest.mark.parametrize(
    ("first", "second", "kind"),
    [
        ("2026-12-04", "2027-01-06", "date (ISO 8601)"),
        ("2026-12-04T10:00:00.123Z", "2027-01-06T10:00:02.456Z", "timestamp (ISO 8601)"),
        ("Thu Dec 03 2026", "Tue Jan 05 2027", "date (JavaScript toDateString)"),
        (
            "Thu Dec 03 2026 10:00:00 GMT+0000 (Coordinated Universal Time)",
            "Tue Jan 05 2027 10:00:03 GMT+0000 (Coordinated Universal Time)",
            "date (JavaScript Date.toString)",
        ),
        (
            "Thu, 03 Dec 2026 10:00:00 GMT",
            "Tue, 05 Jan 2027 10:00:03 GMT",
            "date (RFC 1123, toUTCString)",
        ),
        ("Thu Dec  3 10:00:00 2026", "Tue Jan  5 10:00:03 2027", "date (Python ctime)"),
        (
            "Thursday, December 3, 2026",
            "Tuesday, January 5, 2027",
            "date (weekday, month day, year)",
        ),
        ("December 3, 2026", "January 5, 2027", "date (month day, year)"),
        ("3 December 2026", "5 January 2027", "date (day month year)"),
        ("12/3/2026", "1/5/2027", "date (numeric)"),
        ("10:00:00 AM", "10:00:03 AM", "time"),
        (
            "6f1c2a3b-1d2e-4f50-9a8b-7c6d5e4f3a2b",
            "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d",
            "uuid",
        ),
    ],
)
def test_each_date_form_and_id_has_its_shape(first: str, second: str, kind: str) -> None:
    text_first, text_second = f"Now: {first}. Go.", f"Now: {second}. Go."
    learned = learn(request(text_first), request(text_second))
    (rule,) = learned.normalize
    assert rule.kind == kind
    assert rule.at == "messages.0.content"
    assert rule.seen.pairs == [(first, second)]
    pattern = re.compile(rule.pattern)
    assert pattern.sub(rule.replace, text_first) == pattern.sub(rule.replace, text_second)
    assert pattern.sub(rule.replace, pattern.sub(rule.replace, text_first)) == pattern.sub(
        rule.replace, text_first
    )  # it maps its own output to itself
    assert learned.verified


def test_every_date_shape_compiles_and_leaves_its_placeholder_alone() -> None:
    for shape in DATES:
        assert not shape.compiled.search(shape.replace)


def test_a_number_after_unchanged_text_is_normalized_there_only() -> None:
    first = request("Turn started at: 1733312345678 ms. Limit: 200 tokens.")
    second = request("Turn started at: 1736312349999 ms. Limit: 200 tokens.")
    (rule,) = learn(first, second).normalize
    assert (rule.kind, rule.pattern, rule.replace) == (
        "number",
        r"(?<=Turn started at: )\d+",
        "<n>",
    )


def test_an_id_with_a_prefix_and_a_hex_id() -> None:
    first = request("session sess_8f7a6b5c4d3e, commit 3f2a9c1d0e8b7a6f5e4d")
    second = request("session sess_1a2b3c4d5e6f, commit 9e8d7c6b5a4f3e2d1c0b")
    kinds = {rule.kind: rule.pattern for rule in learn(first, second).normalize}
    assert kinds == {"id": r"\bsess_[A-Za-z0-9]+", "hex id": r"\b[0-9a-f]{20}\b"}


def test_a_token_after_unchanged_text() -> None:
    first = request('{"device":"Zq9KxPvA3mW"}')
    second = request('{"device":"Lr2NbYt7cEs"}')
    (rule,) = learn(first, second).normalize
    assert rule.pattern == r'(?<=\{"device":")[A-Za-z0-9_-]+'


def test_a_uuid_inside_a_json_string_field() -> None:
    first = request(
        "hi",
        metadata={
            "client_info": json.dumps({"session_id": "6f1c2a3b-1d2e-4f50-9a8b-7c6d5e4f3a2b"})
        },
    )
    second = request(
        "hi",
        metadata={
            "client_info": json.dumps({"session_id": "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"})
        },
    )
    learned = learn(first, second)
    assert [(rule.kind, rule.at) for rule in learned.normalize] == [
        ("uuid", "metadata.client_info")
    ]


def test_literal_escapes_only_what_re_reads() -> None:
    assert literal('a "b" (c). ') == 'a "b" \\(c\\)\\. '
    assert re.fullmatch(literal("x.y*(z) q"), "x.y*(z) q")


def test_a_change_inside_a_word_is_not_given_a_shape() -> None:
    assert shape_of("the cat sat", (4, 7, 4, 7), "the dog sat") is None


# -- relocation, ignore, the model's own values -------------------------------------------------


def test_the_runs_own_paths_ask_for_relocation() -> None:
    first = request(f"You work in {ONE.cwd}; notes in {ONE.home}/notes.")
    second = request(f"You work in {TWO.cwd}; notes in {TWO.home}/notes.")
    learned = learn(first, second, (ONE, TWO))
    assert rules(learned) == {"relocate": True}
    assert learned.relocate is not None and learned.relocate.requests == {1}
    assert learned.verified


def test_fields_without_a_usable_pattern_are_ignored_with_their_values() -> None:
    first = request("hi", seed=12, metadata={"mood": "calm"}, only_first="x")
    second = request("hi", seed=98, metadata={"mood": "blue sky"})
    learned = learn(first, second)
    assert rules(learned) == {"ignore": ["metadata.mood", "only_first", "seed"]}
    seen = {rule.path: rule.seen.pairs for rule in learned.ignore}
    assert seen == {
        "metadata.mood": [("calm", "blue sky")],
        "only_first": [("x", None)],
        "seed": [(12, 98)],
    }
    assert learned.verified


def _tool_call(call_id: str) -> dict[str, Any]:
    call = {"id": call_id, "type": "function"}
    return call | {"function": {"name": "get_weather", "arguments": '{"city": "Nairobi"}'}}


def _with_tool_round(base: dict[str, Any], call_id: str) -> dict[str, Any]:
    second = copy.deepcopy(base)
    second["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": [_tool_call(call_id)]},
        {"role": "tool", "tool_call_id": call_id, "content": '{"forecast": "sunny"}'},
    ]
    return second


def _answer(call_id: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "tool_calls": [_tool_call(call_id)]}}]}


def test_ids_the_model_minted_need_no_rule() -> None:
    base = request("hi")
    first = turns(
        base,
        _with_tool_round(base, "call_AAAAaaaa1111"),
        answers=[_answer("call_AAAAaaaa1111"), {"choices": []}],
    )
    second = turns(
        base,
        _with_tool_round(base, "call_BBBBbbbb2222"),
        answers=[_answer("call_BBBBbbbb2222"), {"choices": []}],
    )
    learned = learn_rules(first, second)
    assert rules(learned) == {}
    assert [(d.request, d.change.path if d.change else None) for d in learned.from_model] == [
        (2, "messages.2.tool_calls.0.id"),
        (2, "messages.3.tool_call_id"),
    ]
    assert learned.verified


def test_the_same_id_not_from_the_model_gets_a_rule() -> None:
    base = request("hi")
    first = turns(base, _with_tool_round(base, "call_AAAAaaaa1111"))
    second = turns(base, _with_tool_round(base, "call_BBBBbbbb2222"))
    learned = learn_rules(first, second)
    assert [(rule.kind, rule.at) for rule in learned.normalize] == [
        ("id", "messages.2.tool_calls.0.id"),
        ("id", "messages.3.tool_call_id"),
    ]


def test_list_positions_that_vary_become_a_wildcard() -> None:
    one = request("hi", user="At 2026-12-04: hi")
    two = request("hi", user="At 2027-01-06: hi")
    later_one = copy.deepcopy(one)
    later_one["messages"] += [
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "At 2026-12-04: more"},
    ]
    later_two = copy.deepcopy(two)
    later_two["messages"] += [
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "At 2027-01-06: more"},
    ]
    learned = learn_rules(turns(one, later_one), turns(two, later_two))
    (rule,) = learned.normalize
    assert rule.at == "messages.*.content"
    assert rule.seen.requests == {1, 2}
    assert learned.verified


# -- what no rule can make equal ------------------------------------------------------------------


def test_an_item_only_one_run_sent_remains() -> None:
    first = request("hi")
    second = copy.deepcopy(first)
    second["messages"].append({"role": "user", "content": "and tomorrow?"})
    learned = learn(first, second)
    assert rules(learned) == {}
    assert not learned.verified
    (left,) = learned.remaining
    assert left.change is not None and left.change.path == "messages.2"
    assert left.change.kind == "added"


def test_different_request_counts_remain() -> None:
    learned = learn_rules(turns(request("a"), request("b")), turns(request("a")))
    assert learned.requests == (2, 1)
    assert [(d.request, d.reason) for d in learned.remaining] == [
        (2, "only run 1 made this model request")
    ]
    assert not learned.verified


def test_another_protocol_remains() -> None:
    second = [Turn("anthropic", request("a"), 200, {})]
    learned = learn_rules(turns(request("a")), second)
    assert [d.reason for d in learned.remaining] == [
        "run 1 sent it as openai-chat, run 2 as anthropic"
    ]


def test_verification_applies_the_rules_as_a_replay_does() -> None:
    first, second = request("On 2026-12-04."), request("On 2027-01-06.")
    learned = learn(first, second)
    assert verify(learned, turns(first), turns(second)) == []
    learned.normalize.clear()  # without its rule, the date is a difference again
    (left,) = verify(learned, turns(first), turns(second))
    assert left.change is not None and left.change.path == "messages.0.content"


# -- the printed rules ----------------------------------------------------------------------------


def _run(number: int, place: Place, requests: list[Turn] | None) -> LearnRun:
    result = FlowResult("weather", Path("w.flow.yaml"), "record", Path("w.trace.yaml"))
    if requests is None:
        result.failures = [Failure("the agent exited with code 3")]
    return LearnRun(number, place, "today", result, requests, [])


DATED = Dating({"FAKETIME": "+33d"}, "2027-01-06", "33 days later (faketime)")


def test_the_printed_rules_are_yaml_to_paste_and_equal_the_json() -> None:
    first = request(
        f"In {ONE.cwd} on 2026-12-04 (Thursday, December 3, 2026): it's 'quoted'",
        seed=1,
        metadata={"s": "6f1c2a3b-1d2e-4f50-9a8b-7c6d5e4f3a2b"},
    )
    second = request(
        f"In {TWO.cwd} on 2027-01-06 (Tuesday, January 5, 2027): it's 'quoted'",
        seed=2,
        metadata={"s": "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"},
    )
    learned = learn(first, second, (ONE, TWO))
    runs = [_run(1, ONE, turns(first)), _run(2, TWO, turns(second))]
    text = "\n".join(learned_text(Path("w.flow.yaml"), runs, learned, DATED))
    parsed = yaml.safe_load(text)
    assert parsed == {"match": learned.match_json()}
    assert set(parsed["match"]) == {"relocate", "normalize", "ignore"}
    assert '# uuid, 1 request(s): run 1 "6f1c2a3b-1d2e-4f50-9a8b-7c6d5e4f3a2b", run 2 "0a9b' in text
    assert "# 1 request(s): run 1 1, run 2 2\n    - 'seed'" in text
    assert text.endswith(
        "# Verified: with these rules, the 1 request(s) of the two runs are equal."
    )
    document = learned_json(Path("w.flow.yaml"), runs, learned, DATED, 0)
    assert document["match"] == parsed["match"] and document["verified"] is True
    assert [rule["rule"] for rule in document["rules"]] == [
        "relocate",
        "normalize",
        "normalize",
        "normalize",
        "ignore",
    ]


def test_what_remains_is_printed_and_not_verified() -> None:
    learned = learn_rules(turns(request("a"), request("b")), turns(request("a")))
    runs = [_run(1, ONE, turns(request("a"), request("b"))), _run(2, TWO, turns(request("a")))]
    text = "\n".join(learned_text(Path("w.flow.yaml"), runs, learned, DATED))
    assert (
        "#   run 1 made 2 model request(s), run 2 made 1: only the first 1 could be compared"
        in text
    )
    assert "# NOT verified: with these rules, 1 difference(s) remain" in text
    assert "#   request 2: only run 1 made this model request" in text
    assert "# No rule is needed" in text
    assert yaml.safe_load(text) is None  # comments only: nothing to paste


def test_a_failed_run_learns_nothing_and_says_which() -> None:
    runs = [_run(1, ONE, turns(request("a"))), _run(2, TWO, None)]
    text = "\n".join(learned_text(Path("w.flow.yaml"), runs, None, DATED))
    assert "# run 2 failed: the agent exited with code 3" in text
    assert "# Nothing was learned" in text
    document = learned_json(Path("w.flow.yaml"), runs, None, DATED, 1)
    assert document["match"] is None and document["runs"][1]["status"] == "failed"


def test_existing_rules_are_named_and_the_rest_is_what_is_still_needed() -> None:
    first, second = request("On 2026-12-04."), request("On 2027-01-06.")
    learned = learn(first, second)
    runs = [
        LearnRun(
            number,
            place,
            "today",
            _run(1, place, None).result,
            turns(body),
            [{"relocate": True, "from": "spec"}],
        )
        for number, place, body in ((1, ONE, first), (2, TWO, second))
    ]
    text = "\n".join(learned_text(Path("w.flow.yaml"), runs, learned, DATED))
    assert "# The 1 match rule(s) already in force" in text
    assert "the rules below are the ones still needed beyond them." in text


def test_without_faketime_the_date_is_not_varied_and_that_is_said() -> None:
    dating = faketime_dating(which=lambda _name: None)
    assert not dating.varied and dating.environ == {}
    assert "`faketime` (libfaketime) is not installed, so the date was not varied" in dating.note
    learned = learn(request("a"), request("a"))
    runs = [_run(1, ONE, turns(request("a"))), _run(2, TWO, turns(request("a")))]
    text = "\n".join(learned_text(Path("w.flow.yaml"), runs, learned, dating))
    assert "#   the date was not varied (see run 2): no date rule can be learned" in text


def test_two_large_unrelated_texts_are_compared_in_bounded_time() -> None:
    # Token by token, two unrelated 60 KB texts took 38 s of CPU: aligned by lines first,
    # and a part too large for tokens is one span (and the field an `ignore`).
    words = ["alpha", "beta", "the", "a", "of", "file", "path"]
    draw = random.Random(1)
    texts = [" ".join(draw.choice(words) for _ in range(10_000)) for _ in range(2)]
    started = time.process_time()
    learned = learn(request(texts[0]), request(texts[1]))
    assert time.process_time() - started < 5
    assert rules(learned) == {"ignore": ["messages.0.content"]}


def test_changes_far_apart_in_a_long_text_are_found_line_by_line() -> None:
    lines = [f"line {n}: the path of the file" for n in range(5000)]
    first, second = list(lines), list(lines)
    first[10] += " at 2026-12-04"
    second[10] += " at 2027-01-06"
    first[4000] += " id 6f1c2a3b-1d2e-4f50-9a8b-7c6d5e4f3a2b"
    second[4000] += " id 0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"
    learned = learn(request("\n".join(first)), request("\n".join(second)))
    assert sorted(rule.kind for rule in learned.normalize) == ["date (ISO 8601)", "uuid"]
    assert learned.verified


def test_a_project_must_hold_the_spec(tmp_path: Path) -> None:
    from flowproof_cli.errors import ConfigError
    from flowproof_cli.runner.learn import _project_of

    spec = tmp_path / "app" / "specs" / "w.flow.yaml"
    spec.parent.mkdir(parents=True)
    spec.touch()
    assert _project_of(spec, None) == (spec.parent, Path("w.flow.yaml"))
    assert _project_of(spec, tmp_path / "app") == (tmp_path / "app", Path("specs/w.flow.yaml"))
    with pytest.raises(ConfigError, match="other: no such folder"):
        _project_of(spec, tmp_path / "other")
    (tmp_path / "other").mkdir()
    with pytest.raises(ConfigError, match=r"w\.flow\.yaml is not inside the project folder"):
        _project_of(spec, tmp_path / "other")


def test_a_skipped_run_says_why() -> None:
    skipped = _run(2, TWO, None)
    skipped.result.failures = []
    skipped.result.skipped = "not set: API_KEY (skip_unless_env)"
    text = "\n".join(learned_text(Path("w.flow.yaml"), [_run(1, ONE, None), skipped], None, DATED))
    assert "# run 2 failed: it was skipped: not set: API_KEY (skip_unless_env)" in text
