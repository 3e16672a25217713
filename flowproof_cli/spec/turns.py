"""A conversation's turns: a flow's steps grouped per `user:` step (`conversation.py` says
what a turn is), and the rules across `agent` and `steps` for a conversation.

It sits above `agent.py` and `steps.py`, which hold `conversation.py`'s models, so those
models never import the steps back.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowproof_cli.spec.agent import AgentSpec
from flowproof_cli.spec.conversation import PROMPT_KIND, UNTIL_EXAMPLE, USER_KIND, SimulatedUser
from flowproof_cli.spec.problems import spec_problem
from flowproof_cli.spec.steps import Step


@dataclass(frozen=True)
class ConversationTurnSpec:
    """One `user:` step and the assertion steps after it, up to the next `user:`."""

    number: int  # 1-based position among the `user:` steps
    message: str | None  # the text (None when simulated)
    simulated: SimulatedUser | None
    line: int | None  # the `user:` step's YAML line
    steps: tuple[Step, ...]


def group_turns(steps: list[Step]) -> tuple[tuple[Step, ...], tuple[ConversationTurnSpec, ...]]:
    """The steps before the first `user:` (they judge the whole conversation), and one
    turn per `user:` step with the steps after it. No `user:` step: both empty."""
    openers = [index for index, step in enumerate(steps) if step.kind == USER_KIND]
    if not openers:
        return (), ()
    turns = []
    for number, start in enumerate(openers, start=1):
        end = openers[number] if number < len(openers) else len(steps)
        value = getattr(steps[start], USER_KIND)
        simulated = value if isinstance(value, SimulatedUser) else None
        turns.append(
            ConversationTurnSpec(
                number=number,
                message=None if simulated is not None else str(value),
                simulated=simulated,
                line=steps[start].line,
                steps=tuple(steps[start + 1 : end]),
            )
        )
    return tuple(steps[: openers[0]]), tuple(turns)


def check_conversation(agent: AgentSpec, steps: list[Step]) -> None:
    """The rules across `agent` and `steps` for a conversation (spec problems at a line)."""
    kinds = [step.kind for step in steps]
    if USER_KIND in kinds and PROMPT_KIND in kinds:
        later = max(kinds.index(USER_KIND), kinds.index(PROMPT_KIND))
        raise spec_problem(
            "`prompt:` and `user:` steps are in one flow: `prompt:` steps are one task given "
            "up front, `user:` steps are the turns of a conversation. Fix: write every "
            "message as a `- user: ...` step (a conversation), or keep only `prompt:` steps "
            "(a one-turn flow)",
            ("steps", later, kinds[later]),
        )
    conversation = agent.conversation
    if conversation is not None and USER_KIND not in kinds:
        raise spec_problem(
            "`agent.conversation` is set, but no step is a `user:` turn, so there is nothing "
            "to send. Fix: write the messages as `- user: ...` steps (not `prompt:`), or "
            "remove `agent.conversation`",
            ("agent", "conversation"),
        )
    needs_until = conversation is None or conversation.until is None
    if USER_KIND in kinds and agent.command is not None and needs_until:
        raise spec_problem(
            "this flow is a conversation (it has `user:` steps) and its agent is a "
            "`command`, which needs `agent.conversation.until`: a regex for the line the "
            "agent prints when its turn is over (its prompt, or a protocol's end-of-turn "
            f"line), so flowproof never guesses by timing. Fix: add `conversation: "
            f"{{{UNTIL_EXAMPLE}}}` under `agent`",
            ("agent", "conversation") if conversation is not None else ("agent",),
        )
