"""The prose assertion grammar: what parses, and that each mistake names the fix."""

from __future__ import annotations

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.spec import (
    Clause,
    Matcher,
    ReplyAssertion,
    parse_reply_assertion,
    parse_tool_assertion,
)


def test_bare_tool_name() -> None:
    parsed = parse_tool_assertion("  get_weather ")
    assert parsed.tool == "get_weather"
    assert parsed.clauses == ()
    assert parsed.source == "get_weather"


def test_clauses_split_on_and() -> None:
    parsed = parse_tool_assertion("get_weather where city equals Nairobi and units is metric")
    assert parsed.clauses == (
        Clause(path=("city",), path_text="city", matcher=Matcher.EQUALS, value="Nairobi"),
        Clause(path=("units",), path_text="units", matcher=Matcher.EQUALS, value="metric"),
    )


def test_value_runs_to_end_of_clause() -> None:
    parsed = parse_tool_assertion("search where query contains New York   City")
    assert parsed.clauses[0].value == "New York   City"
    # `and` inside a word is not a separator.
    parsed = parse_tool_assertion("search where query contains Sandy Anderson")
    assert parsed.clauses[0].value == "Sandy Anderson"


def test_dotted_path_with_indexes() -> None:
    clause = parse_tool_assertion("book where passengers.0.name equals Ada").clauses[0]
    assert clause.path == ("passengers", 0, "name")
    assert clause.path_text == "passengers.0.name"


@pytest.mark.parametrize(
    ("text", "matcher", "value"),
    [
        ("t where a equals 1", Matcher.EQUALS, "1"),
        ("t where a is 1", Matcher.EQUALS, "1"),
        ("t where a contains x", Matcher.CONTAINS, "x"),
        ("t where a matches ^N.*i$", Matcher.MATCHES, "^N.*i$"),
        ("t where a exists", Matcher.EXISTS, None),
        ("t where a is absent", Matcher.ABSENT, None),
        ("t where a is missing", Matcher.ABSENT, None),
        ("t where a is absently", Matcher.EQUALS, "absently"),
        ("t where a equals ${CITY}", Matcher.EQUALS, "${CITY}"),
    ],
)
def test_matchers(text: str, matcher: Matcher, value: str | None) -> None:
    (clause,) = parse_tool_assertion(text).clauses
    assert clause.matcher is matcher
    assert clause.value == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty"),
        ("where city equals x", "no tool name"),
        ("get weather", "expected `where`"),
        ("get_weather where", "no condition"),
        ("get_weather where   ", "no condition"),
        ("get_weather where city", "no matcher"),
        ("get_weather where city near Nairobi", "unknown matcher `near`"),
        ("get_weather where city equals", "needs a value"),
        ("get_weather where city is", "needs a value"),
        ("get_weather where city exists yes", "takes no value"),
        ("get_weather where city is absent now", "takes no value"),
        ("get_weather where city matches (unclosed", "not a valid regular expression"),
        ("get_weather where a..b exists", "empty segment"),
        ("get_weather where city exists and  and x exists", "unknown matcher"),
    ],
)
def test_errors_name_the_fix(text: str, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_tool_assertion(text)
    message = str(info.value)
    assert expected in message
    assert "Fix:" in message


def test_unknown_matcher_lists_valid_matchers_and_hints_at_spaces() -> None:
    with pytest.raises(SpecError) as info:
        parse_tool_assertion("book where passenger name equals Ada")
    message = str(info.value)
    for spelling in ("equals", "contains", "matches", "exists", "is absent"):
        assert spelling in message
    assert "no spaces" in message


def test_regex_error_includes_the_re_error() -> None:
    with pytest.raises(SpecError) as info:
        parse_tool_assertion("t where a matches [a-")
    assert "unterminated character set" in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("reply contains sunny", "sunny"),
        ("reply is  it is sunny ", "it is sunny"),
        ("reply contains 25 °C and sunny", "25 °C and sunny"),
    ],
)
def test_reply_assertion(text: str, expected: str) -> None:
    assert parse_reply_assertion(text) == ReplyAssertion(text=expected, source=text.strip())


@pytest.mark.parametrize("text", ["reply has sunny", "sunny", "the reply contains x", ""])
def test_bad_reply_assertion(text: str) -> None:
    with pytest.raises(SpecError, match="expected `reply contains TEXT`"):
        parse_reply_assertion(text)


def test_reply_assertion_without_text() -> None:
    with pytest.raises(SpecError, match="no text"):
        parse_reply_assertion("reply contains   ")
