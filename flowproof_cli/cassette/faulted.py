"""The model faults of a session: a faulted call answered at record and at replay alike.

`CassetteSession` asks `faulted_record` / `faulted_replay` first; None means the request is
answered as any other. At record a status or reset fault is answered without forwarding and
its answer is kept as the call's turn, which the identical retry's real answer replaces; a
fault that alters an answer forwards once and serves its altered form, and the retry gets
the kept answer without a second forward. At replay the faulted request must match a
recorded turn as strictly as any (a mismatch is the usual divergence), then gets the fault;
the identical retry gets the recorded answer. So one turn per model call is kept at record,
and replay finds the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.cassette.divergence import DIVERGENCE_STATUS, Divergence
from flowproof_cli.cassette.forward import Forward, PendingTurn
from flowproof_cli.cassette.index import TurnIndex
from flowproof_cli.cassette.turn import Turn, match_key
from flowproof_cli.dialects.base import Dialect, Rendered
from flowproof_cli.faults.kinds import FaultedCall, fault_answer
from flowproof_cli.faults.model_calls import Fire, ModelCalls, Recover
from flowproof_cli.faults.plan import RESET, Fault
from flowproof_cli.match.rules import MatchRules

#: The status a reset's kept answer is stored with (the agent got no answer at all).
RESET_STATUS = 502


class FaultedSession(Protocol):
    """What the faults read and change of the session that asks them (session.py's
    `CassetteSession`, which imports this module: typed by this protocol, the faults
    never import the session back)."""

    faults: ModelCalls
    conversation: OpenTurn | None
    recorded: list[Turn]
    served: list[int]
    rules: MatchRules
    divergence: Divergence | None
    record_command: str
    on_divergence: Callable[[], None] | None
    index: TurnIndex | None  # replay: the match index

    def render(
        self, dialect: Dialect, live: dict[str, Any], status: int, response: Any
    ) -> Rendered: ...


def _step(
    session: FaultedSession, dialect_name: str, canonical: dict[str, Any]
) -> Fire | Recover | None:
    calls = session.faults
    if not calls.active:
        return None
    turn = session.conversation.number if session.conversation else None
    return calls.step(match_key(dialect_name, canonical), turn)


def _answer(
    session: FaultedSession, fault: Fault, dialect: Any, live: dict[str, Any], turn: Turn | None
) -> Rendered | None:
    """The fault's answer to the call (altering `turn`'s answer when it alters one), or
    None when it cannot apply to it (withdrawn, the reason kept)."""
    response = turn.response if turn is not None else None

    def render(answer: Any) -> Rendered:
        return session.render(dialect, live, 200, answer)

    answer = fault_answer(fault, FaultedCall(dialect, live, response, render))
    if isinstance(answer, str):
        session.faults.withdraw(fault, answer)
        return None
    return answer


def _kept_answer(fault: Fault, dialect: Any, request: dict[str, Any], **tags: Any) -> Turn:
    """A status or reset fault's answer, as the call's turn until a retry replaces it."""
    status = RESET_STATUS if fault.kind == RESET else int(fault.value)
    body = {"flowproof_fault": fault.what}
    return Turn(dialect.name, request, status, body, fault=fault.label, **tags)


def faulted_record(
    session: FaultedSession, pending: PendingTurn, forward: Any
) -> Rendered | Forward | None:
    """Record: the answer to a faulted call, or the forward it needs; None: not faulted.
    `forward(pending)` builds the forward of a call."""
    step = _step(session, pending.dialect.name, pending.canonical)
    if step is None:
        return None
    fault, position = step.fault, step.position
    if isinstance(step, Recover):
        if position is None:  # its first answer is still on its way: forward as any call
            return None
        kept = session.recorded[position]
        if kept.fault_only:  # the real answer replaces the fault's
            return forward(replace(pending, fault=fault.label, replaces=position))
        return session.render(pending.dialect, pending.live_request, kept.status, kept.response)
    if fault.alters_answer:
        if step.first or position is None:
            return forward(replace(pending, fault=fault.label, alter=fault))
        kept = session.recorded[position]
        altered = _answer(session, fault, pending.dialect, pending.live_request, kept)
        return altered or session.render(
            pending.dialect, pending.live_request, kept.status, kept.response
        )
    if step.first:
        tags = {
            "agent": pending.agent,
            "transport": pending.transport,
            "conversation_turn": pending.conversation_turn,
        }
        session.recorded.append(_kept_answer(fault, pending.dialect, pending.canonical, **tags))
        session.faults.served_by(len(session.recorded) - 1)
    return _answer(session, fault, pending.dialect, pending.live_request, None)


def altered_upstream_answer(
    session: FaultedSession, pending: PendingTurn, rendered: Rendered, position: int
) -> Rendered:
    """Record: the upstream's answer to a call whose fault alters it, kept as it came
    (turn `position`) and served altered."""
    if pending.alter is None or rendered.status != 200:
        return rendered
    session.faults.served_by(position)
    kept = session.recorded[position]
    altered = _answer(session, pending.alter, pending.dialect, pending.live_request, kept)
    return altered or rendered


def faulted_replay(
    session: FaultedSession, dialect: Any, live: dict[str, Any], canonical: dict[str, Any]
) -> Rendered | None:
    """Replay: the answer to a faulted call; None: answered as any other (not faulted, or
    its first attempt matched no recorded turn: the divergence path explains it)."""
    step = _step(session, dialect.name, canonical)
    if step is None:
        return None
    fault, position = step.fault, step.position
    if isinstance(step, Fire) and step.first:
        tag = session.conversation.number if session.conversation else None
        assert session.index is not None
        position = session.index.claim(dialect.name, canonical, tag)
        if position is None:
            session.faults.withdraw(fault)
            return None
        session.served.append(position)
        session.faults.served_by(position)
    assert position is not None
    turn = session.recorded[position]
    if isinstance(step, Recover):
        if turn.fault_only:
            return _retried(session, dialect, fault, position)
        return session.render(
            dialect, live, turn.status, session.rules.live_response(turn.response)
        )
    if fault.alters_answer:
        served = replace(turn, response=session.rules.live_response(turn.response))
        answer = _answer(session, fault, dialect, live, served)
        return answer or session.render(dialect, live, turn.status, served.response)
    return _answer(session, fault, dialect, live, None)


def _retried(session: FaultedSession, dialect: Any, fault: Fault, position: int) -> Rendered:
    """The agent retried a faulted call that was not retried when recorded: the trace has
    no answer for it, so the replay diverges here."""
    session.divergence = Divergence(
        position + 1,
        f"turn {position + 1}: the agent retried the faulted call ({fault.label}); when "
        "recorded it did not retry, so the trace has no answer for the retry. Fix: re-record "
        f"the flow with `{session.record_command}` if the retry is the intended behaviour",
    )
    (session.on_divergence or (lambda: None))()
    message = f"flowproof: {session.divergence.message}"
    body = dialect.error_body(message, "flowproof_divergence", DIVERGENCE_STATUS)
    return Rendered(DIVERGENCE_STATUS, "application/json", json.dumps(body).encode())
