"""A conversation's verdict turn by turn, as the text output, JUnit and pytest say it.

`FlowResult.conversation` holds each turn the run opened with its own verdict (the runner's
`turn_verdicts`): these lines are read from it alone, so every view names the same turns.
A turn is failed when a failure carries its number, never by position: a failure of turn 2
is never said of turn 1. A failure of the whole conversation (a step before the first
`user:`, a crash) fails the flow and no turn; the line then says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowproof_cli.verdict import FlowResult


def _label(turn: dict[str, Any]) -> str:
    """`conversation turn 2 ("Then cancel it, please.")`, worded as divergences are."""
    from flowproof_cli.cassette.conversation import turn_label  # noqa: PLC0415 (dialects)

    number, message = turn.get("turn"), turn.get("message")
    return turn_label(
        number if isinstance(number, int) else 0, message if isinstance(message, str) else None
    )


def _turns(result: FlowResult) -> list[dict[str, Any]]:
    return [turn for turn in result.conversation or () if isinstance(turn, dict)]


def failed_turns(result: FlowResult) -> list[dict[str, Any]]:
    """The turns whose verdict failed, in turn order."""
    return [turn for turn in _turns(result) if turn.get("passed") is False]


def turns_line(result: FlowResult) -> str | None:
    """`turns: 1 passed, 1 failed (conversation turn 2 ("..."))` for a failed conversation;
    None for a one-turn flow or a flow that did not fail."""
    turns = _turns(result)
    if result.conversation is None or result.status != "failed":
        return None
    if not turns:
        return "turns: none was sent (the failure came before the first)"
    failed = failed_turns(result)
    line = f"turns: {len(turns) - len(failed)} passed, {len(failed)} failed"
    if failed:
        return f"{line} ({', '.join(_label(turn) for turn in failed)})"
    return f"{line} (no turn failed: the failure is the flow's)"


def turn_rows(result: FlowResult) -> list[str]:
    """Each turn with its verdict: `conversation turn 1 ("..."): passed, 1 model call(s)`."""
    return [_row(turn) for turn in _turns(result)]


def _row(turn: dict[str, Any]) -> str:
    verdict = "passed" if turn.get("passed") is not False else "failed"
    said = [verdict, f"{turn.get('model_calls', 0)} model call(s)"]
    if turn.get("simulated"):
        said.append("simulated")
    if turn.get("ended") is False:
        said.append("did not end")
    if isinstance(turn.get("status"), int):
        said.append(f"HTTP {turn['status']}")
    return f"{_label(turn)}: {', '.join(said)}"


def turn_of(result: FlowResult, number: int) -> dict[str, Any] | None:
    """The verdict of conversation turn `number`, if the run opened it."""
    return next((turn for turn in _turns(result) if turn.get("turn") == number), None)


def user_step_lines(result: FlowResult, steps: Sequence[int | None]) -> dict[int, int]:
    """Turn number -> the spec line of the `user:` step that opened it; `steps` holds each
    `user:` step's line by its 1-based position."""
    lines: dict[int, int] = {}
    for turn in _turns(result):
        number, step = turn.get("turn"), turn.get("step")
        if isinstance(number, int) and isinstance(step, int) and 0 < step <= len(steps):
            line = steps[step - 1]
            if line:
                lines[number] = line
    return lines
