"""The prose assertion grammar of flow steps.

    assert_tool_call:    NAME [where PATH MATCHER [VALUE] [and PATH MATCHER [VALUE] ...]]
    assert:              reply contains TEXT   |   reply is TEXT
                         output contains TEXT  |   output matches REGEX
                         exit code equals N    |   exit code is N
                         model calls equals N  |   model calls is N
                         model calls at least N |  model calls at most N

`reply` is what the model last said; `output`, `exit code` and `model calls` are facts of the
whole run (the agent's own stdout and stderr, how its process ended, every model request the
session saw), so they are judged once per flow.

Prose instead of nested YAML keeps a spec readable by people who did not write it. The parser
is hand-written (not a regex soup) so each mistake gets its own message with the fix. Errors
are raised as ``SpecError`` without a file or line: the loader knows where the text came from
and attaches both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from flowproof_cli.errors import SpecError
from flowproof_cli.match.patterns import BadPattern, compile_pattern


class Matcher(StrEnum):
    """How a clause compares the argument at PATH with VALUE."""

    EQUALS = "equals"
    CONTAINS = "contains"
    MATCHES = "matches"
    EXISTS = "exists"
    ABSENT = "is absent"

    @property
    def takes_value(self) -> bool:
        return self not in (Matcher.EXISTS, Matcher.ABSENT)


# Spellings accepted in prose, longest first so `is absent` wins over `is` + "absent".
_VALUELESS_SPELLINGS: tuple[tuple[str, Matcher], ...] = (
    ("is absent", Matcher.ABSENT),
    ("is missing", Matcher.ABSENT),
    ("exists", Matcher.EXISTS),
)
_VALUED_SPELLINGS: tuple[tuple[str, Matcher], ...] = (
    ("equals", Matcher.EQUALS),
    ("is", Matcher.EQUALS),
    ("contains", Matcher.CONTAINS),
    ("matches", Matcher.MATCHES),
)

VALID_MATCHERS = (
    "`equals VALUE` (alias `is VALUE`), `contains VALUE`, `matches REGEX`, "
    "`exists`, `is absent` (alias `is missing`)"
)

_CLAUSE_SPLIT = re.compile(r"\s+and\s+")
_REPLY = re.compile(r"reply\s+(contains|is)(?:\s+(.*))?", re.DOTALL)
_OUTPUT = re.compile(r"output\s+(contains|matches)(?:\s+(.*))?", re.DOTALL)
_EXIT_CODE = re.compile(r"exit\s+code\s+(equals|is)(?:\s+(.*))?", re.DOTALL)
_MODEL_CALLS = re.compile(
    r"model\s+calls\s+(equals|is|at\s+least|at\s+most)(?:\s+(.*))?", re.DOTALL
)
#: The subjects of `assert:` and how each is written, for messages.
ASSERT_FORMS = (
    "`reply contains TEXT`, or `output contains TEXT`, `output matches REGEX`, "
    "`exit code equals N`, `model calls equals N` (or `at least N`, `at most N`)"
)
#: Every spelling of the run's subjects (`output`, `exit code`, `model calls`), each a form
#: that can fail on its own.
RUN_FORMS = (
    "output contains",
    "output matches",
    "exit code equals",
    "exit code is",
    "model calls equals",
    "model calls is",
    "model calls at least",
    "model calls at most",
)


@dataclass(frozen=True)
class Clause:
    """One `PATH MATCHER [VALUE]` condition on a tool call's arguments."""

    path: tuple[str | int, ...]
    path_text: str
    matcher: Matcher
    value: str | None  # None exactly when the matcher takes no value; may hold ${VAR}

    def __str__(self) -> str:
        if self.value is None:
            return f"{self.path_text} {self.matcher.value}"
        return f"{self.path_text} {self.matcher.value} {self.value}"


@dataclass(frozen=True)
class ToolCallAssertion:
    """A parsed `assert_tool_call` / `assert_no_tool_call`: the prose text, or the
    structured mapping (`args` partial, or exact with `exact`), with an optional call count."""

    tool: str
    clauses: tuple[Clause, ...]
    source: str
    args: dict[str, Any] | None = None  # the structured form's expected arguments
    exact: bool = False  # `args_exact`: these arguments and no others
    times: int | None = None  # exactly this many calls match (assert_tool_call only)

    def __str__(self) -> str:
        return self.source


@dataclass(frozen=True)
class ReplyAssertion:
    """A parsed `assert: reply contains TEXT` (`reply is TEXT` is the same substring check)."""

    text: str
    source: str = ""

    def __str__(self) -> str:
        return self.source or f"reply contains {self.text}"


@dataclass(frozen=True)
class OutputAssertion:
    """A parsed `assert: output contains TEXT` / `output matches REGEX`: the agent's own
    stdout and stderr, whole (not the model's reply)."""

    matcher: Matcher  # CONTAINS or MATCHES
    text: str  # may hold ${VAR}
    source: str = ""

    def __str__(self) -> str:
        return self.source or f"output {self.matcher.value} {self.text}"


@dataclass(frozen=True)
class ExitCodeAssertion:
    """A parsed `assert: exit code equals N` (alias `is`): the agent's process exits with N.
    With one, a non-zero exit is this step's to judge, not a failure of the run by itself."""

    code: int
    source: str = ""

    def __str__(self) -> str:
        return self.source or f"exit code equals {self.code}"


@dataclass(frozen=True)
class ModelCallsAssertion:
    """A parsed `assert: model calls equals N` (alias `is`), `at least N`, `at most N`:
    every model request the flow's session saw, retries and refused ones included."""

    comparison: str  # "equals", "at least" or "at most"
    count: int
    source: str = ""

    def holds(self, calls: int) -> bool:
        if self.comparison == "at least":
            return calls >= self.count
        if self.comparison == "at most":
            return calls <= self.count
        return calls == self.count

    def __str__(self) -> str:
        return self.source or f"model calls {self.comparison} {self.count}"


#: What an `assert:` step can say.
Assertion = ReplyAssertion | OutputAssertion | ExitCodeAssertion | ModelCallsAssertion
#: The subjects that are facts of the whole run, judged once per flow.
RunAssertion = OutputAssertion | ExitCodeAssertion | ModelCallsAssertion


def parse_tool_assertion(text: str) -> ToolCallAssertion:
    """Parse `NAME [where CLAUSE [and CLAUSE ...]]`; raise SpecError naming the fix."""
    source = text.strip()
    if not source:
        raise SpecError(
            "the assertion is empty. Fix: write the tool name, e.g. "
            "`get_weather where city equals Nairobi`"
        )
    parts = source.split(None, 1)
    head = parts[0]
    rest = parts[1].strip() if len(parts) > 1 else ""
    if head == "where":
        raise SpecError(
            f"`{source}` has no tool name before `where`. Fix: start with the tool name, e.g. "
            f"`get_weather {source}`"
        )
    if not rest:
        return ToolCallAssertion(tool=head, clauses=(), source=source)
    where_parts = rest.split(None, 1)
    if where_parts[0] != "where":
        raise SpecError(
            f"expected `where` after the tool name `{head}`, got `{where_parts[0]}`. Fix: tool "
            f"names have no spaces; write `{head} where PATH MATCHER VALUE` or just `{head}`"
        )
    body = where_parts[1].strip() if len(where_parts) > 1 else ""
    if not body:
        raise SpecError(
            f"`{source}` has `where` but no condition after it. Fix: add one, e.g. "
            f"`{head} where city equals Nairobi`, or drop `where`"
        )
    clauses = tuple(_parse_clause(part.strip(), source) for part in _CLAUSE_SPLIT.split(body))
    return ToolCallAssertion(tool=head, clauses=clauses, source=source)


def parse_path(path_text: str) -> tuple[str | int, ...]:
    """`passengers.0.name` -> ("passengers", 0, "name"); digits index into arrays."""
    segments = path_text.split(".")
    if any(not segment for segment in segments):
        raise SpecError(
            f"the path `{path_text}` has an empty segment. Fix: write dotted keys with array "
            "indexes as numbers, e.g. `passengers.0.name`"
        )
    # ASCII digits only: `str.isdigit` is also true of `²`, which `int` refuses.
    return tuple(
        int(segment) if segment.isascii() and segment.isdigit() else segment for segment in segments
    )


def _parse_clause(text: str, source: str) -> Clause:
    if not text:
        raise SpecError(
            f"`{source}` has an empty condition around `and`. Fix: write `PATH MATCHER VALUE` "
            "on both sides of `and`"
        )
    parts = text.split(None, 1)
    path_text = parts[0]
    rest = parts[1].strip() if len(parts) > 1 else ""
    path = parse_path(path_text)
    if not rest:
        raise SpecError(
            f"the condition `{text}` has no matcher after the path `{path_text}`. "
            f"Fix: use one of {VALID_MATCHERS}"
        )
    for spelling, matcher in _VALUELESS_SPELLINGS:
        if _starts_with_words(rest, spelling):
            extra = rest[len(spelling) :].strip()
            if extra:
                raise SpecError(
                    f"`{spelling}` takes no value, but `{text}` gives `{extra}`. Fix: drop "
                    f"`{extra}` (to compare with the text `{extra}` write `equals {extra}`)"
                )
            return Clause(path=path, path_text=path_text, matcher=matcher, value=None)
    for spelling, matcher in _VALUED_SPELLINGS:
        if _starts_with_words(rest, spelling):
            value = rest[len(spelling) :].strip()
            if not value:
                raise SpecError(
                    f"`{spelling}` needs a value, but `{text}` has none. Fix: write "
                    f"`{path_text} {spelling} VALUE`, or use `exists` / `is absent`"
                )
            if matcher is Matcher.MATCHES:
                compile_regex(value)
            return Clause(path=path, path_text=path_text, matcher=matcher, value=value)
    word = rest.split(None, 1)[0]
    later_words = rest.split()[1:]
    hint = ""
    if any(spelling.split()[0] in later_words for spelling, _ in _VALUED_SPELLINGS):
        hint = "; a path has no spaces, use dots for nesting, e.g. `passenger.name`"
    raise SpecError(f"unknown matcher `{word}` in `{text}`. Fix: use one of {VALID_MATCHERS}{hint}")


def compile_regex(pattern: str) -> re.Pattern[str]:
    """Compile a `matches` value now, so a bad regex fails at load time, not mid-run."""
    try:
        return compile_pattern(pattern)
    except BadPattern as exc:
        raise SpecError(
            f"`matches {_shown(pattern)}` is not a valid regular expression: {exc}. Fix: "
            "correct the regex (Python `re` syntax; escape literal characters like `(`, `[`, "
            "`.`, `+`)"
        ) from None


def _shown(text: str, limit: int = 80) -> str:
    """A value quoted in a message, shortened: a message is not the place for a kilobyte."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_reply_assertion(text: str) -> ReplyAssertion:
    """Parse `reply contains TEXT` / `reply is TEXT`; both are substring checks."""
    source = text.strip()
    match = _REPLY.fullmatch(source)
    if match is None:
        raise SpecError(
            f"cannot read `assert: {_shown(source)}`: expected {ASSERT_FORMS}. Fix: "
            "write e.g. `assert: reply contains sunny` (tool calls use `assert_tool_call:`)"
        )
    value = (match.group(2) or "").strip()
    if not value:
        raise SpecError(
            f"`assert: {source}` has no text to look for. Fix: write `reply {match.group(1)} "
            "TEXT`, e.g. `reply contains sunny`"
        )
    return ReplyAssertion(text=value, source=source)


def parse_assertion(text: str) -> Assertion:
    """Parse any `assert:` text by its subject (`reply`, `output`, `exit code`, `model
    calls`); raise SpecError naming the forms and the fix."""
    source = text.strip()
    words = source.split()
    head = " ".join(words[:2])
    if words[:1] == ["output"]:
        return _parse_output(source)
    if head == "exit code":
        return ExitCodeAssertion(_whole_number(source, _EXIT_CODE, signed=True), source)
    if head == "model calls":
        match = _MODEL_CALLS.fullmatch(source)
        count = _whole_number(source, _MODEL_CALLS, signed=False)
        comparison = " ".join(match.group(1).split()) if match else "equals"
        return ModelCallsAssertion("equals" if comparison == "is" else comparison, count, source)
    return parse_reply_assertion(source)


def _parse_output(source: str) -> OutputAssertion:
    match = _OUTPUT.fullmatch(source)
    if match is None:
        raise SpecError(
            f"cannot read `assert: {_shown(source)}`: `output` takes `contains TEXT` or "
            "`matches REGEX`. Fix: write e.g. `assert: output contains try again`"
        )
    value = (match.group(2) or "").strip()
    verb = match.group(1)
    if not value:
        what = "REGEX" if verb == "matches" else "TEXT"
        raise SpecError(
            f"`assert: {source}` has nothing to look for. Fix: write `output {verb} {what}`, "
            "e.g. `output contains try again`"
        )
    matcher = Matcher.MATCHES if verb == "matches" else Matcher.CONTAINS
    if matcher is Matcher.MATCHES and "${" not in value:
        compile_regex(value)
    return OutputAssertion(matcher, value, source)


def _whole_number(source: str, pattern: re.Pattern[str], *, signed: bool) -> int:
    """N of `exit code equals N` / `model calls ... N`, or the SpecError naming the fix."""
    subject = "exit code" if signed else "model calls"
    example = "exit code equals 1" if signed else "model calls equals 3"
    match = pattern.fullmatch(source)
    if match is None:
        verbs = "`equals N` (alias `is N`)" + ("" if signed else ", `at least N`, `at most N`")
        raise SpecError(
            f"cannot read `assert: {_shown(source)}`: `{subject}` takes {verbs}. Fix: write "
            f"e.g. `assert: {example}`"
        )
    value = (match.group(2) or "").strip()
    digits = value[1:] if signed and value.startswith("-") else value
    if not (digits.isascii() and digits.isdigit()):
        what = "an exit code" if signed else "a count of model requests, 0 or more"
        raise SpecError(
            f"`assert: {_shown(source)}` needs a whole number ({what}), got "
            f"{_shown(value) or 'nothing'!r}. Fix: write e.g. `{example}`"
        )
    return int(value)


def _starts_with_words(text: str, words: str) -> bool:
    """True when `text` begins with `words` as whole words (`is` does not match `isnt`)."""
    if not text.startswith(words):
        return False
    return len(text) == len(words) or text[len(words)].isspace()
