"""Every verdict form of a conversation can FAIL, and its twin (the one change undone) passes.

One conversation (tests/falsifiability/agents/order_chat.py: an openai-SDK chat loop with
`lookup_order` and `cancel_order`) is recorded once against the scripted fake; each case is
a copy of its folder with one change to the spec, the agent or the trace, replayed offline.
A case states its exit code and a fragment of the failure. Every case's twin is the base as
recorded, which must pass (run once)."""

from __future__ import annotations

import copy
import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_upstream import Reply
from tests.falsifiability.twin_runs import (
    TraceEdit,
    Written,
    replay_cases,
    verdict_tests,
    verdicts_fixture,
)

pytestmark = pytest.mark.slow

AGENT = Path(__file__).resolve().parent / "agents" / "order_chat.py"
WHERE = "Where is my order 4711?"
CANCEL = "Cancel it, please."
#: The `timeout` of the cases that wait it out: the whole run's bound, so it must hold the
#: agent's start (the openai import alone took over 4 s on a loaded CI machine).
WAIT_S = 30


def order_model(dialect: str, body: dict[str, Any]) -> Reply:
    """The model: a tool call for each question, then the tool's answer in words."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        state = json.loads(last["content"])["state"]
        return Reply(text=f"Order 4711 is {state}.")
    text = str(last.get("content") or "").lower()
    tool = "cancel_order" if "cancel" in text else "lookup_order"
    return Reply(tool_calls=[(tool, json.dumps({"order_id": 4711}))])


def spec(steps: list[Any], **extra: Any) -> dict[str, Any]:
    agent = {
        "command": f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}",
        "conversation": {"until": "^> $", "wait_first": True},
    }
    return {"name": "order chat", "app": "agent", "agent": agent, "steps": steps, **extra}


BASE = [
    {"user": WHERE},
    {"assert_tool_call": "lookup_order where order_id equals 4711"},
    {"assert": "reply contains shipped"},
    {"user": CANCEL},
    {"assert_tool_call": "cancel_order where order_id equals 4711"},
    {"assert": "reply contains cancelled"},
]


def _retag(trace: dict[str, Any]) -> None:
    """The two turns' calls swap their conversation turn."""
    for turn in trace["turns"]:
        turn["conversation_turn"] = 3 - turn["conversation_turn"]


def _twice_in_turn_two(trace: dict[str, Any]) -> None:
    last = [turn for turn in trace["turns"] if turn["conversation_turn"] == 2][-1]
    trace["turns"].append(copy.deepcopy(last))


def _one_turn(trace: dict[str, Any]) -> None:
    del trace["conversation"]
    for turn in trace["turns"]:
        del turn["conversation_turn"]


def _drop_second_call_of_turn_one(trace: dict[str, Any]) -> None:
    calls = [turn for turn in trace["turns"] if turn["conversation_turn"] == 1]
    trace["turns"].remove(calls[1])


@dataclass(frozen=True)
class Case:
    """One conversation verdict that must fail: the change, the exit code, the fragment."""

    code: int
    message: str
    steps: list[Any] = field(default_factory=lambda: BASE)
    spec: dict[str, Any] = field(default_factory=dict)  # top-level keys over the base's
    agent: dict[str, Any] = field(default_factory=dict)  # agent keys over the base's
    trace: TraceEdit | None = None


def _waits_out_the_timeout(message: str, agent: dict[str, Any]) -> Case:
    """A case whose agent never does what flowproof waits for: the flow ends at its timeout."""
    return Case(1, message, spec={"timeout": WAIT_S}, agent=agent)


CASES: dict[str, Case] = {
    "turn-reply": Case(
        1,
        f'conversation turn 2 ("{CANCEL}"): assert reply contains refunded',
        steps=[*BASE[:5], {"assert": "reply contains refunded"}],
    ),
    "tool-of-another-turn": Case(
        1,
        f'conversation turn 2 ("{CANCEL}"): assert_tool_call lookup_order',
        steps=[*BASE[:4], {"assert_tool_call": "lookup_order"}],
    ),
    "no-tool-call-in-turn": Case(
        1,
        f'conversation turn 2 ("{CANCEL}"): assert_no_tool_call cancel_order',
        steps=[*BASE, {"assert_no_tool_call": "cancel_order"}],
    ),
    "strict-per-turn": Case(1, "cancel_order", steps=BASE[:4], spec={"strict": True}),
    "changed-message": Case(
        1,
        'divergence in conversation turn 2 ("Cancel it now."), model call 1:',
        steps=[*BASE[:3], {"user": "Cancel it now."}, *BASE[4:]],
    ),
    "recorded-in-another-turn": Case(
        1,
        f'this call was recorded in conversation turn 2 ("{CANCEL}"), not in this one',
        trace=_retag,
    ),
    "extra-call-in-turn": Case(
        1,
        f'divergence in conversation turn 1 ("{WHERE}"), model call 2: extra call: the agent '
        "made a model call beyond the 1 recorded in this turn",
        trace=_drop_second_call_of_turn_one,
    ),
    "unserved-call": Case(
        1,
        f'conversation turn 2 ("{CANCEL}"): the agent made 2 model call(s) in this turn, the '
        "recording has 3",
        trace=_twice_in_turn_two,
    ),
    "turn-never-ends": _waits_out_the_timeout(
        f'conversation turn 2 ("{CANCEL}") did not end within {WAIT_S} s: no line the agent '
        "printed after the message matched until '^> $'",
        {"env": {"ORDER_CHAT_NO_PROMPT_AFTER": "2"}},
    ),
    "exits-mid-conversation": Case(
        1,
        f'the agent exited with code 0 during conversation turn 2 ("{CANCEL}"), before it '
        "ended the turn (no line matched until '^> $')",
        agent={"env": {"ORDER_CHAT_EXIT_AFTER": "2"}},
    ),
    "exits-before-the-first-turn": Case(
        1,
        "the agent exited with code 0 before the conversation's first turn was sent",
        agent={"env": {"ORDER_CHAT_EXIT_AFTER": "0"}},
    ),
    "does-not-exit-after-the-last-turn": _waits_out_the_timeout(
        f"the agent did not exit within {WAIT_S} s after the conversation's last turn, when "
        "flowproof closed its stdin",
        {"env": {"ORDER_CHAT_LINGER": "1"}},
    ),
    "first-prompt-never-printed": _waits_out_the_timeout(
        f"the agent did not print its first prompt within {WAIT_S} s (wait_first: no line "
        "matched until '^>> $')",
        {"conversation": {"until": "^>> $", "wait_first": True}},
    ),
    "until-past-its-budget": Case(
        1,
        f'conversation turn 1 ("{WHERE}"): the `until` pattern `(.|.)*!` '
        "(agent.conversation.until) ran past its budget",
        agent={"conversation": {"until": "(.|.)*!", "wait_first": False}},
    ),
    "one-turn-trace": Case(2, "was recorded as a one-turn flow, but", trace=_one_turn),
}


def _written(case: Case) -> Written:
    document = spec(case.steps, **case.spec)
    document["agent"].update(case.agent)
    return document, case.trace


def _all_cases(root: Path) -> dict[str, list[Any]]:
    cases = {name: _written(case) for name, case in CASES.items()}
    waiting = [name for name, case in CASES.items() if "timeout" in case.spec]
    return replay_cases(root, spec(BASE), cases, "--json", script=order_model, waiting=waiting)


verdicts = verdicts_fixture("conversation-cases", _all_cases)

test_the_case_fails_with_its_message, test_the_twin_of_every_case_passes = verdict_tests(CASES)


@pytest.mark.parametrize("name", ["turn-never-ends", "exits-mid-conversation"])
def test_a_turn_that_never_ended_is_the_turn_that_failed(
    name: str, verdicts: dict[str, list[Any]]
) -> None:
    """The run's own failure in a turn is that turn's: `--json` carries it on the failure
    and marks the turn failed, so no view says every turn passed."""
    flow = json.loads(verdicts[name][1])["flows"][0]
    assert [failure["turn"] for failure in flow["failures"]] == [2]
    assert [turn["passed"] for turn in flow["conversation"]] == [True, False]
    assert flow["conversation"][1]["ended"] is False
