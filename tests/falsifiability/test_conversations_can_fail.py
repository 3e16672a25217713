"""Every verdict form of a conversation can FAIL, and its twin (the one change undone) passes.

One conversation (tests/falsifiability/agents/order_chat.py: an openai-SDK chat loop with
`lookup_order` and `cancel_order`) is recorded once against the scripted fake; each case is
a copy of its folder with one change to the spec or the trace, replayed offline. A case
states its exit code and a fragment of the failure; all run in one directory run."""

from __future__ import annotations

import copy
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import computed_once, run_cli
from tests.fakes.fake_upstream import FakeUpstream, Reply

pytestmark = pytest.mark.slow

AGENT = Path(__file__).resolve().parent / "agents" / "order_chat.py"
WHERE = "Where is my order 4711?"
CANCEL = "Cancel it, please."


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

TraceEdit = Callable[[dict[str, Any]], None]


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


#: name: (steps, extra spec keys, trace edit, exit code, fragment); the twin is the base.
CASES: dict[str, tuple[list[Any], dict[str, Any], TraceEdit | None, int, str]] = {
    "turn-reply": (
        [*BASE[:5], {"assert": "reply contains refunded"}],
        {},
        None,
        1,
        f'conversation turn 2 ("{CANCEL}"): assert reply contains refunded',
    ),
    "tool-of-another-turn": (
        [*BASE[:4], {"assert_tool_call": "lookup_order"}],
        {},
        None,
        1,
        f'conversation turn 2 ("{CANCEL}"): assert_tool_call lookup_order',
    ),
    "no-tool-call-in-turn": (
        [*BASE, {"assert_no_tool_call": "cancel_order"}],
        {},
        None,
        1,
        f'conversation turn 2 ("{CANCEL}"): assert_no_tool_call cancel_order',
    ),
    "strict-per-turn": (
        BASE[:4],
        {"strict": True},
        None,
        1,
        "cancel_order",
    ),
    "changed-message": (
        [*BASE[:3], {"user": "Cancel it now."}, *BASE[4:]],
        {},
        None,
        1,
        'divergence in conversation turn 2 ("Cancel it now."), model call 1:',
    ),
    "recorded-in-another-turn": (
        BASE,
        {},
        _retag,
        1,
        f'this call was recorded in conversation turn 2 ("{CANCEL}"), not in this one',
    ),
    "unserved-call": (
        BASE,
        {},
        _twice_in_turn_two,
        1,
        f'conversation turn 2 ("{CANCEL}"): the agent made 2 model call(s) in this turn, the '
        "recording has 3",
    ),
    "turn-never-ends": (
        BASE,
        {"timeout": 4},
        None,
        1,
        f'conversation turn 2 ("{CANCEL}") did not end within 4 s: no line the agent '
        "printed after the message matched until '^> $'",
    ),
    "one-turn-trace": (
        BASE,
        {},
        _one_turn,
        2,
        "was recorded as a one-turn flow, but",
    ),
}


def _recorded(folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.flow.yaml").write_text(yaml.safe_dump(spec(BASE), sort_keys=False))
    with FakeUpstream(script=order_model) as fake:
        env = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "OPENAI_API_KEY": "sk-x"}
        result = run_cli("record", folder / "base.flow.yaml", env=env, cwd=folder)
    assert result.code == 0, result.output
    return yaml.safe_load((folder / "base.trace.yaml").read_text())


def _case(root: Path, name: str, trace: dict[str, Any], case: Any, twin: bool) -> Path:
    steps, extra, edit, _, _ = case
    folder = root / (f"{name}.twin" if twin else name)
    folder.mkdir(parents=True)
    document = spec(BASE if twin else steps, **({} if twin else extra))
    if name == "turn-never-ends" and not twin:
        document["agent"]["env"] = {"ORDER_CHAT_NO_PROMPT_AFTER": "2"}
    (folder / "case.flow.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    edited = copy.deepcopy(trace)
    if edit is not None and not twin:
        edit(edited)
    (folder / "case.trace.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    return folder


def _all_cases(root: Path) -> dict[str, list[Any]]:
    """Record the base, then run every case and its twin: {folder: [exit code, output]}."""
    trace = _recorded(root / "base")
    found: dict[str, list[Any]] = {}
    for name, case in CASES.items():
        for twin in (False, True):
            folder = _case(root / "cases", name, trace, case, twin)
            result = run_cli("run", "--json", folder / "case.flow.yaml", cwd=folder)
            found[folder.name] = [result.code, result.output]
    return found


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    root = tmp_path_factory.mktemp("conversation-cases")
    found: dict[str, list[Any]] = computed_once(
        tmp_path_factory, "conversation-cases", lambda: _all_cases(root)
    )
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_case_fails_with_its_message(name: str, verdicts: dict[str, list[Any]]) -> None:
    code, output = verdicts[name]
    expected_code, fragment = CASES[name][3], CASES[name][4]
    assert code == expected_code, output
    assert fragment in output.replace('\\"', '"'), output


@pytest.mark.parametrize("name", sorted(CASES))
def test_its_twin_passes(name: str, verdicts: dict[str, list[Any]]) -> None:
    code, output = verdicts[f"{name}.twin"]
    assert code == 0, output
