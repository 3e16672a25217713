"""Check a flow's steps against a Trajectory; failures are values with actionable messages.

`assert_tool_call` steps are an ordered subsequence of the tool calls: each consumes the first
matching call after the previous match, so unrelated calls in between are fine (`strict: true`
forbids them). `assert_no_tool_call` looks at every call; `assert: reply ...` at the reply;
`assert: output ...`, `exit code ...` and `model calls ...` at the facts of the run (`RunFacts`).
A failure says what was expected, what the agent actually did, and where to look.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from flowproof_cli.canonical import parse_or
from flowproof_cli.errors import SpecError
from flowproof_cli.match.patterns import PatternBudgetExceeded, within_budget
from flowproof_cli.process import tail_lines
from flowproof_cli.quoting import looks_alike, named, skeleton, unmasked
from flowproof_cli.spec.grammar import (
    Clause,
    ExitCodeAssertion,
    Matcher,
    ModelCallsAssertion,
    OutputAssertion,
    ReplyAssertion,
    ToolCallAssertion,
    compile_regex,
)
from flowproof_cli.spec.models import FlowSpec
from flowproof_cli.spec.steps import NoToolCallStep, ReplyStep, StepBase, ToolCallStep
from flowproof_cli.spec.variables import resolve_variables
from flowproof_cli.trajectory import ToolCall, Trajectory

_MAX_CALLS_SHOWN = 5
_MAX_TEXT = 300


@dataclass(frozen=True)
class AssertionFailure:
    """One failed check; `step_line` is the spec line (None for flow-wide checks)."""

    step_line: int | None
    message: str

    def __str__(self) -> str:
        return f"line {self.step_line}: {self.message}" if self.step_line else self.message


@dataclass(frozen=True)
class RunFacts:
    """What `output`, `exit code` and `model calls` judge: the agent's own stdout and stderr
    (whole; None for a url agent), how its process exited, and every model request the
    flow's session saw (refused, faulted and retried attempts included)."""

    output: str | None
    exit_code: int | None
    model_calls: int


class _Missing:
    """The value at a path that does not resolve (distinct from a present null)."""


_MISSING = _Missing()


def evaluate(
    spec: FlowSpec,
    trajectory: Trajectory,
    environ: Mapping[str, str],
    handles: Mapping[str, str] | None = None,
    *,
    steps: Sequence[StepBase] | None = None,
    strict: bool | None = None,
    run: RunFacts | None = None,
) -> list[AssertionFailure]:
    """Every failed assertion of `spec` (or of `steps`, some of its steps) against
    `trajectory` (and `run`, the facts of the run the `output`, `exit code` and `model
    calls` steps judge), in step order."""
    resolver = _Resolver(spec, environ, handles)
    calls = trajectory.tool_calls
    failures: list[AssertionFailure] = []
    position = 0  # first call the next assert_tool_call may consume
    previous: tuple[int, StepBase] | None = None  # (step number, step) of the last match
    consumed: set[int] = set()
    for number, step in enumerate(spec.steps if steps is None else steps, start=1):
        try:
            if isinstance(step, ToolCallStep):
                assertion = resolver.tool_assertion(step)
                hits = [i for i, call in enumerate(calls) if _matches(call, assertion)]
                found = next((i for i in hits if i >= position), None)
                if assertion.times is not None and len(hits) != assertion.times:
                    failures.append(_failure(step, _explain_count(assertion, calls, hits)))
                elif found is None:
                    message = _explain_missing(assertion, calls, position, previous)
                    failures.append(_failure(step, message))
                else:
                    consumed.update(hits if assertion.times is not None else [found])
                    position = found + 1
                    previous = (number, step)
            elif isinstance(step, NoToolCallStep):
                assertion = resolver.tool_assertion(step)
                hits = [i for i, call in enumerate(calls) if _matches(call, assertion)]
                if hits:
                    failures.append(_failure(step, _explain_forbidden(assertion, calls, hits)))
            elif isinstance(step, ReplyStep):
                problem = _check_assert(step, resolver, trajectory, run)
                if problem is not None:
                    failures.append(_failure(step, problem))
        except PatternBudgetExceeded as exc:  # the flow fails here; no later pattern runs
            failures.append(_stopped(spec, step, exc))
            return failures
    if spec.strict if strict is None else strict:
        unexpected = next((i for i in range(len(calls)) if i not in consumed), None)
        if unexpected is not None:
            failures.append(AssertionFailure(None, _explain_unexpected(calls, unexpected)))
    return failures


class _Resolver:
    """Resolves `${VAR}` in assertion values at evaluation time, naming the step if unset."""

    def __init__(
        self, spec: FlowSpec, environ: Mapping[str, str], handles: Mapping[str, str] | None
    ) -> None:
        self.spec = spec
        self.environ = environ
        self.handles = handles

    def text(self, step: StepBase, value: str) -> str:
        where = f"`{step.kind}` step at line {step.line}" if step.line else f"`{step.kind}` step"
        return resolve_variables(value, self.environ, self.handles, where=where)

    def pattern(self, step: StepBase, value: str) -> None:
        """A `matches` value that is a pattern once its variables are resolved, or the
        SpecError at the step's line."""
        try:
            compile_regex(value)
        except SpecError as exc:
            path = self.spec.source_path
            raise SpecError(
                f"after resolving variables, {exc.detail}",
                path=str(path) if path else None,
                line=step.line,
            ) from None

    def tool_assertion(self, step: ToolCallStep | NoToolCallStep) -> ToolCallAssertion:
        assertion = step.assertion
        if assertion.args is not None:
            return replace(assertion, args=self.values(step, assertion.args))
        clauses = []
        for clause in assertion.clauses:
            value = clause.value
            if value is not None and "${" in value:
                value = self.text(step, value)
                if clause.matcher is Matcher.MATCHES:
                    self.pattern(step, value)
            clauses.append(
                Clause(
                    path=clause.path,
                    path_text=clause.path_text,
                    matcher=clause.matcher,
                    value=value,
                )
            )
        return replace(assertion, clauses=tuple(clauses))

    def values(self, step: StepBase, value: Any) -> Any:
        """A structured `args` value with `${VAR}` resolved in its text leaves."""
        if isinstance(value, dict):
            return {key: self.values(step, item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.values(step, item) for item in value]
        if isinstance(value, str) and "${" in value:
            return self.text(step, value)
        return value


def _failure(step: StepBase, message: str) -> AssertionFailure:
    return AssertionFailure(step.line, f"{step.kind} {unmasked(step.text.strip())}: {message}")


def _stopped(spec: FlowSpec, step: StepBase, exc: PatternBudgetExceeded) -> AssertionFailure:
    """A `matches` pattern past its budget, named at its step's line."""
    where = f"{spec.source_path}:{step.line}" if spec.source_path else f"line {step.line}"
    return _failure(step, str(exc.restated(declared=f"declared at {where}")))


# --- matching -----------------------------------------------------------------------------


def _matches(call: ToolCall, assertion: ToolCallAssertion) -> bool:
    if call.name != assertion.tool:
        return False
    arguments = call.arguments
    if assertion.args is not None:
        return not args_differences(arguments, assertion.args, exact=assertion.exact)
    return all(clause_matches(clause, arguments) for clause in assertion.clauses)


def args_differences(
    actual: Any, expected: Mapping[str, Any], *, exact: bool, prefix: str = ""
) -> list[str]:
    """How a call's arguments differ from the structured `args` (empty: they match).

    Every leaf given must equal the argument at its path, with the semantics of
    `where PATH equals VALUE`; a list is a leaf (compared whole). With `exact`, every
    mapping must also have no keys beyond the expected ones.
    """
    if not isinstance(actual, dict):
        shown = _shorten(_compact(actual))
        return [f"{prefix.rstrip('.') or 'the arguments'} = {shown}, not a mapping"]
    differences: list[str] = []
    for key, want in expected.items():
        path = f"{prefix}{key}"
        if key not in actual:
            differences.append(f"{path} is absent (expected {_shorten(_compact(want))})")
        elif isinstance(want, dict):
            differences.extend(args_differences(actual[key], want, exact=exact, prefix=f"{path}."))
        elif not _leaf_equals(actual[key], want):
            got, wanted = _shorten(_compact(actual[key])), _shorten(_compact(want))
            differences.append(f"{path} = {got} (expected {wanted})")
    if exact:
        extra = [key for key in actual if key not in expected]
        differences.extend(
            f"{prefix}{key} = {_shorten(_compact(actual[key]))} is not expected (args_exact)"
            for key in extra
        )
    return differences


def _leaf_equals(actual: Any, expected: Any) -> bool:
    """`where PATH equals VALUE` with VALUE the leaf (its JSON text unless it is text)."""
    return _equals(actual, expected if isinstance(expected, str) else _compact(expected))


def clause_matches(clause: Clause, arguments: Any) -> bool:
    """Whether one clause holds for a call's parsed arguments."""
    actual = resolve_path(arguments, clause.path)
    if clause.matcher is Matcher.EXISTS:
        return actual is not _MISSING
    if clause.matcher is Matcher.ABSENT:
        return actual is _MISSING
    if actual is _MISSING or clause.value is None:
        return False
    if clause.matcher is Matcher.EQUALS:
        return _equals(actual, clause.value)
    if clause.matcher is Matcher.CONTAINS:
        return _contains(actual, clause.value)
    pattern, text = clause.value, _as_text(actual)
    return within_budget(
        lambda: re.search(pattern, text) is not None,
        kind="`matches` pattern",
        pattern=pattern,
        declared="in a spec step",  # evaluate() names the file and line
        subject=f"the `{clause.path_text}` argument of a tool call",
    )


def resolve_path(value: Any, path: Sequence[str | int]) -> Any:
    """The value at `path`, or the missing marker; an int indexes a list (or a "0" key)."""
    current = value
    for part in path:
        if isinstance(current, dict) and str(part) in current:
            current = current[str(part)]
        elif isinstance(current, list) and isinstance(part, int) and part < len(current):
            current = current[part]
        else:
            return _MISSING
    return current


def _equals(actual: Any, value: str) -> bool:
    """Compare a JSON value with prose text: numbers numerically, bool/null by keyword."""
    if isinstance(actual, bool):
        return value.strip().lower() == ("true" if actual else "false")
    if actual is None:
        return value.strip() == "null"
    if isinstance(actual, int | float):
        return _numbers_equal(actual, value.strip())
    if isinstance(actual, str):
        if actual == value:
            return True
        quoted = parse_or(value, _MISSING) if value.startswith('"') else _MISSING
        return isinstance(quoted, str) and quoted == actual
    expected = parse_or(value, _MISSING)
    return expected is not _MISSING and _json_equal(actual, expected)


def _numbers_equal(actual: int | float, value: str) -> bool:
    try:
        return Decimal(value) == Decimal(str(actual))
    except (InvalidOperation, ValueError):
        return False


def _json_equal(left: Any, right: Any) -> bool:
    """Deep equality where true is not 1 but 1 is 1.0."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    return type(left) is type(right) and left == right


def _contains(actual: Any, value: str) -> bool:
    if isinstance(actual, str):
        return value in actual
    if isinstance(actual, list):
        return any(_equals(element, value) for element in actual)
    if isinstance(actual, dict):
        return value in actual
    return value in _as_text(actual)


def _as_text(actual: Any) -> str:
    return actual if isinstance(actual, str) else _compact(actual)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- failure messages -------------------------------------------------------------------------


def _explain_missing(
    assertion: ToolCallAssertion,
    calls: list[ToolCall],
    position: int,
    previous: tuple[int, StepBase] | None,
) -> str:
    named = [i for i, call in enumerate(calls) if call.name == assertion.tool]
    if not named:
        if not calls:
            return f"{unmasked(assertion.tool)} was never called; the agent made no tool calls"
        alike = next((call.name for call in calls if looks_alike(call.name, assertion.tool)), None)
        if alike is not None:
            return _explain_look_alike(assertion.tool, alike)
        called = ", ".join(unmasked(call.name) for call in calls)
        return (
            f"{unmasked(assertion.tool)} was never called; tools called, in order: {called}. "
            "Check the tool name and the prompt"
        )
    if previous is not None and any(_matches(calls[i], assertion) for i in named):
        number, step = previous
        where = f"step {number}" + (f", line {step.line}" if step.line else "")
        return (
            f"{assertion.tool} was called, but only before the call matched by the previous "
            f"assertion ({where}). Fix the order of the steps, or the agent's"
        )
    candidates = [i for i in named if i >= position] or named
    if assertion.args is not None:
        return _explain_closest(assertion, calls, named, candidates)
    shown = [
        f"call {named.index(i) + 1} {_describe_mismatch(calls[i], assertion)}"
        for i in candidates[:_MAX_CALLS_SHOWN]
    ]
    if len(candidates) > _MAX_CALLS_SHOWN:
        shown.append(f"... and {len(candidates) - _MAX_CALLS_SHOWN} more")
    return f"{assertion.tool} was called {len(named)} time(s) but no call matched: " + "; ".join(
        shown
    )


def _explain_look_alike(asserted: str, called: str) -> str:
    """The agent called a name that prints like the asserted one and is not it (a Cyrillic
    letter, a zero-width space): both shown by code point, the plain one proposed."""
    head = (
        f"{named(asserted, called)} was never called; the agent called "
        f"{named(called, asserted)}, which only looks like it"
    )
    if skeleton(called) == called:
        return f"{head}. Fix: write the name as `{called}`"
    return f"{head} (the model named a tool that is not the one asserted)"


def _describe_mismatch(call: ToolCall, assertion: ToolCallAssertion) -> str:
    """The actual values behind the clauses that failed, e.g. `city = "Paris"`."""
    arguments = call.arguments
    if not call.arguments_are_json:
        return f"has arguments that are not JSON: {_shorten(call.raw_arguments)}"
    if assertion.args is not None:
        return ", ".join(args_differences(arguments, assertion.args, exact=assertion.exact))
    parts = []
    for clause in assertion.clauses:
        if clause_matches(clause, arguments):
            continue
        actual = resolve_path(arguments, clause.path)
        if actual is _MISSING:
            parts.append(f"{clause.path_text} is absent")
        else:
            parts.append(f"{clause.path_text} = {_shorten(_compact(actual))}")
    return ", ".join(parts)


def _explain_closest(
    assertion: ToolCallAssertion, calls: list[ToolCall], named: list[int], candidates: list[int]
) -> str:
    """The structured form: the call whose arguments differ least, and how."""

    def distance(index: int) -> int:
        call = calls[index]
        if not call.arguments_are_json:
            return 1 << 30
        return len(args_differences(call.arguments, assertion.args or {}, exact=assertion.exact))

    closest = min(candidates, key=distance)
    call = calls[closest]
    return (
        f"{assertion.tool} was called {len(named)} time(s) but no call matched; the closest is "
        f"call {named.index(closest) + 1} (turn {call.turn}): "
        f"{_describe_mismatch(call, assertion)}; its arguments: {_shorten(call.raw_arguments)}"
    )


def _explain_count(assertion: ToolCallAssertion, calls: list[ToolCall], hits: list[int]) -> str:
    """`times: N` and another number of matching calls."""
    want = f"{assertion.times} matching call(s)"
    if not hits:
        return f"expected {want}, saw none: " + _explain_missing(assertion, calls, 0, None)
    where = ", ".join(f"{i + 1} (turn {calls[i].turn})" for i in hits[:_MAX_CALLS_SHOWN])
    more = f" and {len(hits) - _MAX_CALLS_SHOWN} more" if len(hits) > _MAX_CALLS_SHOWN else ""
    return (
        f"expected {want}, saw {len(hits)}: at position(s) {where}{more} of {len(calls)} "
        "tool call(s)"
    )


def _explain_forbidden(assertion: ToolCallAssertion, calls: list[ToolCall], hits: list[int]) -> str:
    first = calls[hits[0]]
    times = f" ({len(hits)} matching calls)" if len(hits) > 1 else ""
    return (
        f"{assertion.tool} was called at position {hits[0] + 1} of {len(calls)} (turn "
        f"{first.turn}) with arguments {_shorten(first.raw_arguments)}{times}"
    )


def _explain_unexpected(calls: list[ToolCall], index: int) -> str:
    call = calls[index]
    sequence = ", ".join(c.name for c in calls)
    return (
        f"strict: unexpected tool call {call.name} at position {index + 1} of {len(calls)} "
        f"(turn {call.turn}) is not matched by any assert_tool_call step; tools called, in "
        f"order: {sequence}. Fix: assert it with assert_tool_call, or set `strict: false`"
    )


def _check_assert(
    step: ReplyStep, resolver: _Resolver, trajectory: Trajectory, run: RunFacts | None
) -> str | None:
    """What is wrong with one `assert:` step (None when it holds)."""
    assertion = step.assertion
    if isinstance(assertion, ReplyAssertion):
        return _check_reply(resolver.text(step, assertion.text), trajectory)
    if run is None:
        return "it judges the agent's run, and this check was given none"
    if isinstance(assertion, OutputAssertion):
        text = resolver.text(step, assertion.text)
        if assertion.matcher is Matcher.MATCHES and text != assertion.text:
            resolver.pattern(step, text)
        return _check_output(assertion, text, run.output)
    if isinstance(assertion, ExitCodeAssertion):
        if run.exit_code == assertion.code:
            return None
        said = _output_end(run.output)
        return f"the agent exited with code {run.exit_code}, expected {assertion.code}{said}"
    return _check_model_calls(assertion, run.model_calls)


def _check_output(assertion: OutputAssertion, text: str, output: str | None) -> str | None:
    """`output contains TEXT` / `output matches REGEX` against the agent's whole output."""
    output = output or ""
    if assertion.matcher is Matcher.CONTAINS:
        if text in output:
            return None
        verb = f'does not contain "{text}"'
    else:
        pattern = compile_regex(text)
        found = within_budget(
            lambda: pattern.search(output) is not None,
            kind="`matches` pattern",
            pattern=text,
            declared="in a spec step",  # evaluate() names the file and line
            subject="the agent's output",
        )
        if found:
            return None
        verb = f"does not match {text}"
    if not output.strip():
        return f"the agent printed nothing (its stdout and stderr are empty), so its output {verb}"
    return f"the agent's output {verb}{_output_end(output)}"


def _output_end(output: str | None) -> str:
    """`; its output ends with:` and the last lines the agent printed (nothing if none)."""
    tail = tail_lines(output or "")
    return f"; its output ends with:\n{tail}" if tail.strip() else "; it printed nothing"


def _check_model_calls(assertion: ModelCallsAssertion, calls: int) -> str | None:
    if assertion.holds(calls):
        return None
    expected = "exactly" if assertion.comparison == "equals" else assertion.comparison
    return (
        f"the agent made {calls} model call(s), expected {expected} {assertion.count} "
        "(every model request counts: retries and refused ones too)"
    )


def _check_reply(text: str, trajectory: Trajectory) -> str | None:
    reply = trajectory.reply
    if reply is None:
        if not trajectory.turns:
            return "there is no reply: the agent made no model call"
        last = trajectory.main_thread[-1]
        if last.tool_calls:
            return _explain_tool_call_ending(text, last.turn, last.tool_calls)
        return "there is no reply: the last model response has no text"
    if text in reply:
        return None
    if not reply:
        return f'the reply is empty, so it does not contain "{text}"'
    return f'the reply does not contain "{text}"; the reply was: {_shorten(json.dumps(reply))}'


def _is_final_answer_tool(name: str) -> bool:
    """smolagents' `final_answer`, pydantic-ai's `final_result`, a `FinalAnswer` and the like."""
    folded = re.sub(r"[^a-z]", "", name.lower())
    return "final" in folded or "answer" in folded


def _explain_tool_call_ending(text: str, turn: int, calls: Sequence[ToolCall]) -> str:
    """No reply because the run ended on a tool call: frameworks that answer through a tool
    (smolagents' final_answer) do so by design, so point at asserting on that call.

    Assertions run only when the agent exited by itself (a crash or a timeout is reported
    instead), so this never guesses that the agent stopped early.
    """
    call = next((c for c in calls if _is_final_answer_tool(c.name)), calls[-1])
    arguments = call.arguments if call.arguments_are_json else None
    if not isinstance(arguments, dict):
        arguments = {}
    keys = [key for key in arguments if re.fullmatch(r"[^\s.]+", key)]  # usable as a PATH
    strings = [key for key in keys if isinstance(arguments[key], str)]
    key = "answer" if "answer" in keys else next(iter(strings or keys), None)
    final = _is_final_answer_tool(call.name)
    names = ", ".join(c.name for c in calls)
    ending = f"the last model turn (turn {turn}) is a tool call ({names}) with no text"
    if key is None:
        suggestion, shown = f"assert_tool_call: {call.name}", ""
    else:
        usable = final and isinstance(arguments[key], str) and " and " not in text
        value = text if usable else "..."
        suggestion = f"assert_tool_call: {call.name} where {key} contains {value}"
        shown = f" ({call.name}'s {key} is {_shorten(_compact(arguments[key]))})"
    if final:
        return (
            f"there is no reply: {ending}, so the agent gives its answer through "
            f"{call.name}{shown}. Fix: assert on that call instead: `{suggestion}`"
        )
    return (
        f"there is no reply: {ending}, and no model turn followed it{shown}. If the agent "
        f"ends on a tool call by design, assert on that call instead: `{suggestion}`"
    )


def _shorten(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."
