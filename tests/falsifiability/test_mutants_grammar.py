"""The prose grammar pinned where mutation testing found it loose (docs/falsifiability.md).

The unit tests check that each mistake's message names the fix; these check the whole
message a spec author reads, and the text an assertion shows of itself in a failure.
"""

from __future__ import annotations

import re
import warnings

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.spec import ReplyAssertion, parse_reply_assertion, parse_tool_assertion

MATCHERS = (
    "`equals VALUE` (alias `is VALUE`), `contains VALUE`, `matches REGEX`, `exists`, "
    "`is absent` (alias `is missing`)"
)
REGEX_FIX = (
    "Fix: correct the regex (Python `re` syntax; escape literal characters like `(`, `[`, `.`, `+`)"
)


def tool_error(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_tool_assertion(text)
    return str(info.value)


def reply_error(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_reply_assertion(text)
    return str(info.value)


# -- what an assertion shows of itself --------------------------------------------------------


def test_an_assertion_shows_its_own_text_trimmed() -> None:
    parsed = parse_tool_assertion("  get_weather where city equals Nairobi  ")
    assert str(parsed) == "get_weather where city equals Nairobi"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("t where passengers.0.name exists", "passengers.0.name exists"),
        ("t where city is missing", "city is absent"),
        ("t where city is  Nairobi", "city equals Nairobi"),
    ],
)
def test_a_clause_shows_its_path_matcher_and_value(text: str, shown: str) -> None:
    (clause,) = parse_tool_assertion(text).clauses
    assert str(clause) == shown


def test_a_reply_assertion_shows_its_source_or_its_text() -> None:
    assert str(parse_reply_assertion(" reply is sunny ")) == "reply is sunny"
    assert str(ReplyAssertion(text="sunny")) == "reply contains sunny"


# -- the whole message of each mistake --------------------------------------------------------


def test_an_empty_assertion() -> None:
    assert tool_error("  ") == (
        "the assertion is empty. Fix: write the tool name, e.g. "
        "`get_weather where city equals Nairobi`"
    )


def test_an_unknown_matcher_is_its_first_word_and_gets_no_hint_without_cause() -> None:
    assert tool_error("get_weather where city isnt in Paris") == (
        f"unknown matcher `isnt` in `city isnt in Paris`. Fix: use one of {MATCHERS}"
    )


def test_an_unknown_matcher_before_a_real_one_hints_at_spaces_in_the_path() -> None:
    assert tool_error("book where passenger name equals Ada") == (
        f"unknown matcher `name` in `passenger name equals Ada`. Fix: use one of {MATCHERS}; "
        "a path has no spaces, use dots for nesting, e.g. `passenger.name`"
    )


def test_a_path_with_an_empty_segment() -> None:
    assert tool_error("t where a..b exists") == (
        "the path `a..b` has an empty segment. Fix: write dotted keys with array indexes as "
        "numbers, e.g. `passengers.0.name`"
    )


def test_a_bad_regex_names_the_problem_and_the_fix() -> None:
    assert tool_error("t where a matches [a-") == (
        "`matches [a-` is not a valid regular expression: unterminated character set at "
        f"position 0. {REGEX_FIX}"
    )


def test_a_regex_nested_too_deeply_for_re_is_a_clear_error() -> None:
    pattern = "(" * 5000 + ")" * 5000
    assert tool_error(f"t where a matches {pattern}") == (
        f"`matches {'(' * 77}...` is not a valid regular expression: its groups are nested too "
        f"deeply for Python's `re`. {REGEX_FIX}"
    )


@pytest.mark.parametrize(("length", "shown"), [(80, "x" * 79 + "("), (81, "x" * 77 + "...")])
def test_a_bad_regex_is_quoted_whole_up_to_80_characters(length: int, shown: str) -> None:
    pattern = "x" * (length - 1) + "("
    assert tool_error(f"t where a matches {pattern}").startswith(
        f"`matches {shown}` is not a valid regular expression: missing ), unterminated "
        f"subpattern at position {length - 1}. Fix:"
    )


def test_a_regex_re_only_warns_about_parses_silently() -> None:
    """`[[` is a FutureWarning in `re`: not a spec error, and not noise on the user's output."""
    re.purge()  # a pattern `re` has cached compiles without warning again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (clause,) = parse_tool_assertion("t where a matches [[a]]").clauses
    assert clause.value == "[[a]]"
    assert [str(warning.message) for warning in caught] == []


def test_a_reply_assertion_that_cannot_be_read() -> None:
    assert reply_error("reply has sunny") == (
        "cannot read `assert: reply has sunny`: expected `reply contains TEXT`, or `output "
        "contains TEXT`, `output matches REGEX`, `exit code equals N`, `model calls equals N` "
        "(or `at least N`, `at most N`). Fix: write e.g. "
        "`assert: reply contains sunny` (tool calls use `assert_tool_call:`)"
    )


def test_a_reply_assertion_without_text_repeats_its_own_verb_in_the_fix() -> None:
    assert reply_error("reply is  ") == (
        "`assert: reply is` has no text to look for. Fix: write `reply is TEXT`, e.g. "
        "`reply contains sunny`"
    )
