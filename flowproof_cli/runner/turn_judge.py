"""A conversation judged turn by turn: one loop over its `user:` steps.

The assertion steps after a `user:` step judge the turns it opened (one for a written
message, each turn a simulated user produced for it): their tool calls, their reply (the
last turn's, by the main-thread rule), their `assert_no_tool_call`. Steps before the first
`user:` judge the whole conversation. A replay that served fewer calls in a turn than the
recording holds names that turn. Every failure carries its step's line and its turn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from flowproof_cli.assertions import RunFacts, evaluate
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.cassette.conversation import turn_label
from flowproof_cli.cassette.session import turn_trajectory
from flowproof_cli.runner.turn_outcome import TurnOutcome
from flowproof_cli.spec import FlowSpec
from flowproof_cli.spec.turns import ConversationTurnSpec
from flowproof_cli.verdict import Failure

#: How an assertion names a model call by its position in the trace, `(turn 5)`: in a
#: conversation "turn" is the conversation's, so the call is named a model call there.
_MODEL_TURN = re.compile(r"\(turn (\d+)\)")
#: The most of a url agent's answer a failure quotes.
ANSWER_SHOWN = 200


def judge_turns(
    spec: FlowSpec,
    session: CassetteSession,
    turns: Sequence[TurnOutcome],
    environ: Mapping[str, str],
    run: RunFacts | None = None,
) -> list[Failure]:
    """Every failed assertion of a conversation, the whole conversation's steps first (with
    `run`, the facts of the whole run), then turn by turn in spec order."""
    whole = evaluate(
        spec, session.trajectory(), environ, steps=spec.conversation_steps, strict=False, run=run
    )  # `strict` holds turn by turn: each turn's calls against its own steps
    failures = [Failure(failure.message, failure.step_line) for failure in whole]
    for user in spec.conversation:
        opened = [turn for turn in turns if turn.step == user.number]
        if not opened:  # never sent: the driver's failure (an exit, a timeout) says why
            continue
        trajectory = turn_trajectory(session, *(turn.number for turn in opened))
        where = _where(user, opened)
        for failure in evaluate(spec, trajectory, environ, steps=user.steps):
            said = _MODEL_TURN.sub(r"(model call \1 of the flow)", failure.message)
            message = f"{where}: {said}{_answered(opened)}"
            failures.append(Failure(message, failure.step_line, opened[-1].number))
    return failures


def _where(user: ConversationTurnSpec, opened: Sequence[TurnOutcome]) -> str:
    """`conversation turn 2 ("...")`, or the turns a simulated user produced."""
    if len(opened) == 1:
        return opened[0].label
    first, last = opened[0].number, opened[-1].number
    line = f" at line {user.line}" if user.line else ""
    return f"conversation turns {first}-{last} (the simulated user{line})"


def _answered(opened: Sequence[TurnOutcome]) -> str:
    """A url agent's turn that answered non-2xx, named with its status."""
    failed = [turn for turn in opened if turn.status is not None and not 200 <= turn.status < 300]
    if not failed:
        return ""
    turn = failed[-1]
    body = " ".join(turn.output).strip()
    said = f": {body[:ANSWER_SHOWN]}{'...' if len(body) > ANSWER_SHOWN else ''}" if body else ""
    return f" (the service answered turn {turn.number}'s POST with HTTP {turn.status}{said})"


def unserved_turns(session: CassetteSession, turns: Sequence[TurnOutcome]) -> list[Failure]:
    """Replay: the conversation turns whose recorded calls were not all asked for."""
    served = set(session.served)
    missing: dict[int, list[int]] = {}
    for position, recorded in enumerate(session.recorded):
        if position not in served and recorded.conversation_turn is not None:
            missing.setdefault(recorded.conversation_turn, []).append(position + 1)
    by_number = {turn.number: turn for turn in turns}
    # Every turn's message: those sent this run, and at replay the trace's for the rest.
    messages = session.conversation.messages if session.conversation is not None else {}
    failures = []
    for number, positions in sorted(missing.items()):
        held = sum(1 for each in session.recorded if each.conversation_turn == number)
        made = held - len(positions)
        turn = by_number.get(number)
        message = messages.get(number)
        listed = ", ".join(map(str, positions))
        answered = _answered([turn]) if turn is not None else ""
        failures.append(
            Failure(
                f"{turn_label(number, message)}: the agent made {made} model call(s) in this "
                f"turn, the recording has {held} (recorded turn(s) never requested: {listed})"
                f"{answered}",
                turn=number,
            )
        )
    return failures


def turn_verdicts(
    session: CassetteSession, turns: Sequence[TurnOutcome], failures: Sequence[Failure]
) -> list[dict[str, Any]]:
    """Each turn as it went and its verdict, for `--json`, the run record and the views."""
    used = session.used_turns()
    verdicts = []
    for turn in turns:
        own = [failure for failure in failures if failure.turn == turn.number]
        calls = sum(1 for p in used if session.recorded[p].conversation_turn == turn.number)
        verdicts.append(
            {
                "turn": turn.number,
                "message": turn.message,
                "step": turn.step,
                "simulated": turn.simulated,
                "model_calls": calls,
                "status": turn.status,
                "ended": turn.ended,
                "passed": not own and turn.ended,
                "failures": [failure.to_json() for failure in own],
            }
        )
    return verdicts
