"""The matching core pinned where mutation testing found it loose (docs/falsifiability.md).

Each test here failed against at least one mutant that the unit tests let through: a count a
report prints, a path a rule reaches or does not, a message a user reads.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.cassette import Turn
from flowproof_cli.cassette.divergence import Divergence, explain, nearest_turn
from flowproof_cli.errors import SpecError
from flowproof_cli.match import rules as match_rules
from flowproof_cli.match.paths import PathGlob, map_strings
from flowproof_cli.match.relocate import Relocation
from flowproof_cli.spec import load_spec

CHAT = "openai-chat"
YEAR = re.compile(r"\d{4}")


def chat(*contents: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": text} for text in contents]
    return {"model": "gpt-4o-mini", "messages": messages, **extra}


def relaxed_fields(rules: match_rules.MatchRules, request: dict[str, Any]) -> list[str]:
    """The verdict notes after one request went through the rules."""
    rules.matched(CHAT, request)
    return match_rules.summarize(rules)


# -- ignore: the counts the verdict prints ----------------------------------------------------


def test_a_wildcard_ignore_counts_every_field_it_drops() -> None:
    rules = match_rules.MatchRules([match_rules.IgnoreRule(PathGlob.parse("metadata.*"))])
    notes = relaxed_fields(rules, chat("hi", metadata={"a": 1, "b": 2, "c": 3}))
    assert notes[0].splitlines()[0] == "match rules relaxed 3 field(s) on 1 request(s):"


def test_a_wildcard_key_in_the_middle_counts_every_field_below_it() -> None:
    dropped, count = PathGlob.parse("metadata.*.id").drop(
        {"metadata": {"a": {"id": 1, "k": 0}, "b": {"id": 2}, "c": {"k": 3}}}
    )
    assert dropped == {"metadata": {"a": {"k": 0}, "b": {}, "c": {"k": 3}}}
    assert count == 2


@pytest.mark.parametrize("glob", ["messages.7", "messages.7.content", "model.name"])
def test_an_ignore_that_reaches_nothing_is_reported_unused(glob: str) -> None:
    """A list index past the end, or a path through a string, drops nothing: the verdict
    must say the rule matched nothing, not that it relaxed a field."""
    rules = match_rules.MatchRules([match_rules.IgnoreRule(PathGlob.parse(glob))])
    request = chat("hi", "there")
    assert rules.matched(CHAT, request) == request
    assert match_rules.summarize(rules) == [
        f"match rules unused (they matched nothing in this run):\n  ignore {glob} (spec)"
    ]


# -- normalize `at`: which strings it reaches, and how many it counts ------------------------


def test_normalize_at_a_string_path_rewrites_exactly_that_string() -> None:
    rule = match_rules.NormalizeRule(YEAR, "<year>", at=PathGlob.parse("messages.0.content"))
    request = chat("in 2026", "in 2027", model="gpt-2026", tools=[{"name": "t2026"}])
    changed, count = rule.apply(CHAT, request)
    assert changed == chat("in <year>", "in 2027", model="gpt-2026", tools=[{"name": "t2026"}])
    assert count == 1


def test_normalize_at_counts_only_the_strings_it_changed() -> None:
    rules = match_rules.MatchRules(
        [match_rules.NormalizeRule(YEAR, "<year>", at=PathGlob.parse("messages.*.content"))]
    )
    request = chat("in 2026", "no year", system="2026", tools=[{"name": "t2026"}], n=1)
    notes = relaxed_fields(rules, request)
    assert notes[0].splitlines()[1] == (
        "  normalize /\\d{4}/ at messages.*.content (spec): 1 field(s) on 1 request(s)"
    )


def test_map_strings_returns_an_unchanged_value_itself() -> None:
    """The documented contract: nothing to change, no copy (a request is walked per turn)."""
    value = {"messages": [{"content": "no digits"}], "n": 1}
    result, count = map_strings(value, lambda text: YEAR.sub("<year>", text))
    assert result is value
    assert count == 0


# -- glob errors as the spec author reads them ------------------------------------------------


def spec_with_ignore(tmp_path: Path, glob: str) -> SpecError:
    path = tmp_path / "case.flow.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: n
            app: agent
            agent:
              command: run
            match:
              ignore: ["{glob}"]
            steps:
              - prompt: hi
            """
        ),
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return info.value


def test_an_empty_ignore_path_says_so_at_its_line(tmp_path: Path) -> None:
    message = str(spec_with_ignore(tmp_path, "  "))
    assert re.search(r"case\.flow\.yaml:6: the path is empty\. Fix: write a dotted path", message)


def test_an_ignore_path_with_an_empty_segment_names_it(tmp_path: Path) -> None:
    message = str(spec_with_ignore(tmp_path, "metadata..id"))
    assert (
        "case.flow.yaml:6: the path `metadata..id` has an empty segment (two dots, or a dot "
        "at an end). Fix:"
    ) in message


# -- the rule report: verdict notes and the run record ---------------------------------------


def relocating(*rules: Any) -> match_rules.MatchRules:
    return match_rules.MatchRules(
        list(rules), Relocation("/ci/checkout", "/ci/home"), relocation_origin="preset claude"
    )


def test_relocation_rewrites_the_request_as_matched_and_stored() -> None:
    rules = relocating()
    matched = rules.matched(CHAT, chat("read /ci/checkout/a.py", "home is /ci/home"))
    assert matched == chat("read {cwd}/a.py", "home is {home}")
    assert rules.stored_response({"text": "/ci/checkout/b.py"}) == {"text": "{cwd}/b.py"}


def test_relocation_is_counted_per_field_and_per_request_of_this_run_only() -> None:
    rules = relocating(match_rules.IgnoreRule(PathGlob.parse("metadata")))
    rules.matched(CHAT, chat("in /ci/checkout", "and /ci/home"))
    rules.matched(CHAT, chat("again in /ci/checkout"))
    rules.matched(CHAT, chat("nothing to move"))
    rules.matched(CHAT, chat("recorded /ci/checkout"), count=False)  # the recorded side
    assert [usage.to_json() for usage in rules.report()] == [
        {
            "rule": "relocate ({cwd}=/ci/checkout, {home}=/ci/home)",
            "origin": "preset claude",
            "fields": 3,
            "turns": 2,
            "unused": False,
        },
        {"rule": "ignore metadata", "origin": "spec", "fields": 0, "turns": 0, "unused": True},
    ]
    assert match_rules.summarize(rules) == [
        "match rules relaxed 3 field(s) on 2 request(s):\n"
        "  relocate ({cwd}=/ci/checkout, {home}=/ci/home) (preset claude): 3 field(s) on "
        "2 request(s)",
        "match rules unused (they matched nothing in this run):\n  ignore metadata (spec)",
    ]


def test_relocation_that_changed_nothing_on_the_recorded_side_reports_unused() -> None:
    rules = relocating()
    rules.matched(CHAT, chat("recorded /ci/checkout"), count=False)
    assert match_rules.summarize(rules) == [
        "match rules unused (they matched nothing in this run):\n"
        "  relocate ({cwd}=/ci/checkout, {home}=/ci/home) (preset claude)"
    ]


def test_two_used_rules_are_one_note_a_line_each() -> None:
    rules = match_rules.MatchRules(
        [match_rules.IgnoreRule(PathGlob.parse("metadata")), match_rules.NormalizeRule(YEAR, "<y>")]
    )
    rules.matched(CHAT, chat("in 2026", metadata={"id": 1}))
    assert match_rules.summarize(rules) == [
        "match rules relaxed 2 field(s) on 1 request(s):\n"
        "  ignore metadata (spec): 1 field(s) on 1 request(s)\n"
        "  normalize /\\d{4}/ (spec): 1 field(s) on 1 request(s)"
    ]


def test_a_normalize_rule_snapshot_keeps_its_path() -> None:
    rule = match_rules.NormalizeRule(
        YEAR, "<y>", at=PathGlob.parse("messages.*.content"), origin="suite"
    )
    assert rule.snapshot() == {
        "normalize": {"pattern": "\\d{4}", "replace": "<y>", "at": "messages.*.content"},
        "from": "suite",
    }


def test_an_addon_rule_snapshot_names_the_addon_and_where_it_came_from() -> None:
    """What the trace records, so a stock replay can refuse a trace whose addon is missing."""
    rule = match_rules.AddonRule("StripSession", lambda request, protocol: request, origin="suite")
    assert rule.snapshot() == {"addon": "StripSession", "from": "suite"}


# -- matcher addons: what they are given, what they may not touch, how they are counted -------


def test_an_addon_is_given_the_protocol_of_the_request() -> None:
    seen: list[str] = []

    def spy(request: dict[str, Any], protocol: str) -> dict[str, Any]:
        seen.append(protocol)
        return request

    match_rules.MatchRules([match_rules.AddonRule("Spy", spy)]).matched(
        "anthropic-messages", chat("hi")
    )
    assert seen == ["anthropic-messages"]


def test_an_addon_that_edits_nested_fields_leaves_the_request_it_was_given_alone() -> None:
    def strip_session(request: dict[str, Any], protocol: str) -> dict[str, Any]:
        request["metadata"].pop("session")
        request["messages"][0]["content"] = "edited"
        return request

    live = chat("hi", metadata={"session": "s-1", "user": "u"})
    changed, _ = match_rules.AddonRule("StripSession", strip_session).apply(CHAT, live)
    assert changed["metadata"] == {"user": "u"}
    assert live == chat("hi", metadata={"session": "s-1", "user": "u"})


@pytest.mark.parametrize(
    ("edit", "fields"),
    [
        (lambda r: r, 0),
        (lambda r: r | {"model": "m", "user": "u"}, 2),
        (lambda r: r | {"messages": r["messages"][:1]}, 1),  # a list made shorter
        (lambda r: r | {"messages": [*r["messages"], {"role": "user"}]}, 1),
    ],
)
def test_an_addon_is_counted_by_the_leaves_it_changed(edit: Any, fields: int) -> None:
    rule = match_rules.AddonRule("Edit", lambda request, protocol: edit(request))
    assert rule.apply(CHAT, chat("one", "two"))[1] == fields


def test_an_addon_returning_a_list_is_named_with_its_type_and_the_fix() -> None:
    rule = match_rules.AddonRule("Listy", lambda request, protocol: [request])  # type: ignore[arg-type,return-value]
    with pytest.raises(match_rules.MatcherAddonError) as info:
        rule.apply(CHAT, chat("hi"))
    assert str(info.value) == (
        "the matcher addon Listy returned list, not the request mapping. Fix: make "
        "flowproof_normalize return the (changed) request"
    )


# -- divergence reports -----------------------------------------------------------------------


def tool_call(number: int, name: str, arguments: str) -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {"id": f"call_{number}", "type": "function", "function": function}


def calling(*calls: dict[str, Any], content: Any = None) -> dict[str, Any]:
    assistant = {"role": "assistant", "content": content, "tool_calls": list(calls)}
    return {"model": "m", "messages": [{"role": "user", "content": "go"}, assistant]}


def diverged(recorded: dict[str, Any], replayed: dict[str, Any]) -> Divergence:
    return explain(1, Turn(CHAT, recorded, 200, {}), CHAT, replayed)


DRIFTED = "turn 1: tool-call arguments drifted in message 1 (assistant): "


def test_drift_in_a_later_tool_call_is_reported_after_an_equal_one() -> None:
    recorded = calling(tool_call(1, "a", '{"x":1}'), tool_call(2, "b", '{"y":1}'))
    replayed = calling(tool_call(1, "a", '{"x":1}'), tool_call(2, "b", '{"y":2}'))
    assert diverged(recorded, replayed).message == DRIFTED + "b.y: recorded 1, replayed 2"


def test_a_renamed_tool_call_and_a_later_drift_are_both_reported() -> None:
    recorded = calling(tool_call(1, "a", '{"x":1}'), tool_call(2, "b", '{"y":1}'))
    replayed = calling(tool_call(1, "c", '{"x":1}'), tool_call(2, "b", '{"y":2}'))
    divergence = diverged(recorded, replayed)
    assert divergence.summary == DRIFTED + "tool call changed: recorded a, replayed c"
    assert divergence.details == ("b.y: recorded 1, replayed 2",)


def test_arguments_of_exactly_the_shown_length_are_shown_whole() -> None:
    recorded, replayed = "x" * 79 + "1", "x" * 79 + "2"  # 80 characters, not JSON
    divergence = diverged(
        calling(tool_call(1, "a", recorded)), calling(tool_call(1, "a", replayed))
    )
    assert (
        divergence.summary == DRIFTED + f"a arguments: recorded {recorded!r}, replayed {replayed!r}"
    )


def test_a_long_argument_drift_keeps_the_drift_of_an_earlier_call() -> None:
    recorded = calling(tool_call(1, "a", '{"x":1}'), tool_call(2, "b", "q" * 100 + "1"))
    replayed = calling(tool_call(1, "a", '{"x":2}'), tool_call(2, "b", "q" * 100 + "2"))
    divergence = diverged(recorded, replayed)
    assert divergence.summary == DRIFTED + "a.x: recorded 1, replayed 2"
    assert divergence.details == (
        'b arguments: differs at char 100 of 101: recorded ..."'
        + "q" * 32
        + '1", replayed ..."'
        + "q" * 32
        + '2"',
    )


def six_changes(key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A user message whose `key` (a field of its own, or its content blocks) changed 6 times."""
    if key == "content":
        before: Any = [{"type": "text", "text": f"t{i}"} for i in range(6)]
        after: Any = [{"type": "text", "text": f"t{i}!"} for i in range(6)]
        return (
            {"model": "m", "messages": [{"role": "user", "content": before}]},
            {"model": "m", "messages": [{"role": "user", "content": after}]},
        )
    fields = {f"k{i}": 0 for i in range(6)}
    moved = {f"k{i}": 1 for i in range(6)}
    return (
        {"model": "m", "messages": [{"role": "user", "content": "go", **fields}]},
        {"model": "m", "messages": [{"role": "user", "content": "go", **moved}]},
    )


def test_a_message_field_change_shows_five_paths_then_the_rest_counted() -> None:
    divergence = diverged(*six_changes("fields"))
    assert divergence.summary == "turn 1: message 0 (user) changed: k0: recorded 0, replayed 1"
    assert divergence.details == (
        *(f"k{i}: recorded 0, replayed 1" for i in range(1, 5)),
        "... and 1 more change(s)",
    )


def test_a_content_block_change_shows_five_paths_then_the_rest_counted() -> None:
    divergence = diverged(*six_changes("content"))
    assert divergence.summary == "turn 1: message 0 (user) content changed"
    assert divergence.details == (
        *(f"content.{i}.text: recorded t{i}, replayed t{i}!" for i in range(5)),
        "... and 1 more change(s)",
    )


def test_text_content_replaced_by_blocks_is_shown_as_one_changed_path() -> None:
    text = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    blocks = {"model": "m", "messages": [{"role": "user", "content": [{"text": "hello"}]}]}
    assert diverged(text, blocks).details == (
        'content: recorded hello, replayed [{"text": "hello"}]',
    )


def test_several_tools_added_and_removed_are_listed_comma_separated() -> None:
    def offering(*names: str) -> dict[str, Any]:
        tools = [{"type": "function", "function": {"name": name}} for name in names]
        return {"model": "m", "tools": tools, "messages": []}

    divergence = diverged(offering("a", "b"), offering("c", "d"))
    assert divergence.summary == "turn 1: tools offered changed: added c, d; removed a, b"


def test_a_divergence_as_json_has_every_documented_key() -> None:
    divergence = diverged(calling(tool_call(1, "a", '{"x":1}')), calling(tool_call(1, "a", "[]")))
    assert set(divergence.to_json()) == {"turn", "summary", "details", "message", "changes"}
    assert divergence.to_json()["details"] == list(divergence.details)


# -- the nearest recorded turn ----------------------------------------------------------------


def said(*texts: str, **first: Any) -> dict[str, Any]:
    """A request of user messages; `first` adds fields to the first message only."""
    messages = [{"role": "user", "content": text} for text in texts]
    messages[0].update(first)
    return {"model": "m", "messages": messages}


def nearest(request: dict[str, Any], *candidates: dict[str, Any]) -> int:
    turns = [Turn(CHAT, candidate, 200, {}) for candidate in candidates]
    return nearest_turn(turns, list(range(len(turns))), CHAT, request)


def test_nearest_turn_prefers_two_shared_messages_over_one() -> None:
    assert nearest(said("a", "b", "c"), said("a", "x", "y"), said("a", "b", "z")) == 1


def test_nearest_turn_stops_the_shared_prefix_at_a_field_only_the_raw_entry_has() -> None:
    """A `name` on the first message breaks the prefix although role and content agree."""
    request = said("a", "b", "c")
    assert nearest(request, said("a", "b", "c", name="bot"), said("a", "b", "z")) == 1


def test_nearest_turn_prefers_the_closer_conversation_length() -> None:
    request = said("a", "b", "c", "d", "e")
    shorter_by_three = said("a", "x")
    longer_by_one = said("a", "x", "x", "x", "x", "x")
    assert nearest(request, shorter_by_three, longer_by_one) == 1


def test_nearest_turn_prefers_its_own_protocol_even_when_nothing_else_agrees() -> None:
    request = said("a", "b") | {"tools": [{"type": "function", "function": {"name": "t"}}]}
    other_protocol = Turn("anthropic-messages", said("a"), 200, {})
    far = Turn(CHAT, {"model": "other", "messages": []}, 200, {})  # no model, tool or message
    assert nearest_turn([other_protocol, far], [0, 1], CHAT, request) == 1


def test_nearest_turn_prefers_the_same_tools_offered() -> None:
    def offering(name: str) -> dict[str, Any]:
        return said("a", "b") | {"tools": [{"type": "function", "function": {"name": name}}]}

    assert nearest(offering("t"), offering("u"), offering("t")) == 1


def test_nearest_turn_among_turns_of_other_protocols_takes_the_earliest() -> None:
    turns = [Turn("anthropic-messages", said("a"), 200, {}) for _ in range(3)]
    assert nearest_turn(turns, [1, 2], CHAT, said("a")) == 1
