"""A conversation flow's side of its trace: the state its session starts in, the check that
a trace and a spec agree on being a conversation, and the `conversation:` section written.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from flowproof_cli import trace as traces
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.errors import TraceError
from flowproof_cli.runner.turn_outcome import TurnOutcome
from flowproof_cli.spec import FlowSpec
from flowproof_cli.trace.conversation import RecordedConversation


def conversation_state(spec: FlowSpec, trace: traces.Trace | None) -> OpenTurn | None:
    """A conversation's session state: at record a new conversation id, at replay the
    trace's id and messages (a divergence names a turn by them) and its simulated user's
    lane (the simulated user is answered from it). None for one turn."""
    if not spec.is_conversation:
        return None
    recorded = trace.conversation if trace is not None else None
    if recorded is None:
        return OpenTurn(id=uuid.uuid4().hex)
    messages = dict(enumerate(recorded.messages, start=1))
    return OpenTurn(id=recorded.id, messages=messages, user_lane=list(recorded.user))


def recorded_turns(spec: FlowSpec, trace: traces.Trace, trace_path: Path, spec_path: Path) -> None:
    """A TraceError when the spec is a conversation and the trace one turn, or the other
    way round: the replay could only fail, and not say why."""
    fix = f"Fix: re-record it: flowproof record {spec_path}"
    if spec.is_conversation and trace.conversation is None:
        raise TraceError(
            f"{trace_path} was recorded as a one-turn flow, but {spec_path} is a conversation "
            f"(it has `user:` steps): its calls belong to no conversation turn. {fix}"
        )
    if not spec.is_conversation and trace.conversation is not None:
        turns = len(trace.conversation.messages)
        raise TraceError(
            f"{trace_path} was recorded as a conversation of {turns} turn(s), but {spec_path} "
            f"has no `user:` steps: it is a one-turn flow now. {fix}"
        )


def recorded_conversation(
    session: CassetteSession, turns: Sequence[TurnOutcome]
) -> RecordedConversation | None:
    """The `conversation:` section of a recorded conversation's trace."""
    if session.conversation is None:
        return None
    return RecordedConversation(
        session.conversation.id,
        tuple(turn.message for turn in turns),
        tuple(turn.simulated for turn in turns),
        tuple(session.conversation.user_lane),
    )
