"""Every verdict form of `flowproof check` can FAIL, and its twin (the one change undone)
passes.

Each case is a folder holding one spec and its trace, built in code, with one thing of the
trace no longer what the spec declares (or no trace at all); its twin is the same spec with
a trace written to fit it. One `check --json` over all the cases, one over all the twins:
every case is named stale with its message, no twin is."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli import trace as traces
from flowproof_cli.match.build import build_rules
from flowproof_cli.spec import load_spec
from flowproof_cli.trace.conversation import RecordedConversation
from tests.conftest import computed_once, run_cli
from tests.unit.trace_builders import chat_trace

MOCK = {"now": "2026-01-01T09:00:00Z"}
CONVERSATION = RecordedConversation("c1", ("hi", "bye"), (False, False), ())
ONE_TURN_STEPS = [{"prompt": "What's the weather in Nairobi?"}]
CONVERSATION_AGENT = {"command": "python agent.py", "conversation": {"until": "^> $"}}

#: How a case's trace is written: from the spec as loaded, into the file.
TraceWriter = Callable[[Path], None]


def _spec(**extra: Any) -> dict[str, Any]:
    return {
        "name": "weather",
        "app": "agent",
        "agent": {"command": "python agent.py"},
        "tools": [{"name": "get_time", "result": MOCK}],
        "steps": ONE_TURN_STEPS,
        **extra,
    }


def _fitting(spec_path: Path, **changed: Any) -> None:
    """A trace recorded under exactly what the spec declares, then `changed`."""
    spec = load_spec(spec_path)
    fields: dict[str, Any] = {
        "mocks": dict(spec.mocks),
        "faults": spec.fault_plan,
        "conversation": CONVERSATION if spec.is_conversation else None,
        "match": [],
    }
    if spec.match is not None:
        block = spec.match.declared(spec_path.parent, "spec")
        rules, _ = build_rules([block], cwd=spec_path.parent, home=None)
        fields["match"] = rules.snapshot()
    traces.save(traces.trace_path_for(spec_path), chat_trace(**{**fields, **changed}))


@dataclass(frozen=True)
class Case:
    message: str
    spec: dict[str, Any] = field(default_factory=_spec)
    changed: dict[str, Any] = field(default_factory=dict)  # the trace's fields that moved
    trace: str = "fitting"  # "fitting" (with `changed`), "none", "broken link"


CASES: dict[str, Case] = {
    "no-trace": Case("no trace at <<case>>/w.trace.yaml", trace="none"),
    "trace-broken-link": Case(
        "its trace <<case>>/w.trace.yaml is a symbolic link to nothing", trace="broken link"
    ),
    "other-mocks": Case(
        "its tools' mocks differ from the recorded ones (get_time)",
        changed={"mocks": {"get_time": {"now": "2025-12-31T23:00:00Z"}}},
    ),
    "mock-added": Case(
        "its tools' mocks differ from the recorded ones (get_time)", changed={"mocks": {}}
    ),
    "other-faults": Case(
        "its faults differ from the recorded ones (recorded: none; now: model call 1: answer: 429)",
        spec=_spec(faults=[{"at": "model call 1", "answer": 429}]),
        changed={"faults": ()},
    ),
    "other-match-rules": Case(
        "the match rules it runs with differ from the recorded ones (recorded only: none; now "
        "only: ignore $.model (spec))",
        spec=_spec(match={"ignore": ["$.model"]}),
        changed={"match": []},
    ),
    "match-rules-reordered": Case(
        "the match rules it runs with differ from the recorded ones (the same rules in another "
        "order)",
        spec=_spec(match={"ignore": ["$.model", "$.user"]}),
        changed={
            "match": [
                {"ignore": "$.user", "from": "spec"},
                {"ignore": "$.model", "from": "spec"},
            ]
        },
    ),
    "conversation-as-one-turn": Case(
        "it is a conversation (it has `user:` steps) but was recorded as a one-turn flow",
        spec=_spec(agent=CONVERSATION_AGENT, steps=[{"user": "hi"}, {"user": "bye"}]),
        changed={"conversation": None},
    ),
    "one-turn-as-conversation": Case(
        "it is a one-turn flow (no `user:` steps) but was recorded as a conversation",
        changed={"conversation": CONVERSATION},
    ),
}


def _write(folder: Path, case: Case, *, twin: bool) -> None:
    folder.mkdir(parents=True)
    spec_path = folder / "w.flow.yaml"
    spec_path.write_text(yaml.safe_dump(case.spec, sort_keys=False))
    if twin or case.trace == "fitting":
        _fitting(spec_path, **({} if twin else case.changed))
    elif case.trace == "broken link":
        os.symlink(folder / "gone.trace.yaml", folder / "w.trace.yaml")


def _checked(root: Path, *, twin: bool) -> tuple[int, dict[str, Any]]:
    for name, case in CASES.items():
        _write(root / name, case, twin=twin)
    done = run_cli("check", "--json", root)
    return done.code, json.loads(done.stdout)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        root = tmp_path_factory.mktemp("check-cases")
        code, document = _checked(root / "cases", twin=False)
        twin_code, twins = _checked(root / "twins", twin=True)
        return {
            "root": str(root),
            "code": code,
            "cases": document,
            "twin_code": twin_code,
            "twins": twins,
        }

    return computed_once(tmp_path_factory, "check-cases", compute)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_case_is_stale_with_its_message(checked: dict[str, Any], name: str) -> None:
    folder = Path(checked["root"]) / "cases" / name
    stale = {Path(flow["spec"]).parent.name: flow for flow in checked["cases"]["stale"]}
    assert name in stale, checked["cases"]
    message = CASES[name].message.replace("<<case>>", str(folder))
    assert message in stale[name]["differences"], stale[name]
    assert stale[name]["fix"] == f"flowproof record {folder / 'w.flow.yaml'}"


def test_the_cases_exit_1_and_the_twins_pass(checked: dict[str, Any]) -> None:
    assert checked["code"] == 1 and checked["cases"]["errors"] == []
    assert len(checked["cases"]["stale"]) == len(CASES)
    assert checked["twin_code"] == 0, checked["twins"]
    assert checked["twins"]["current"] == len(CASES)
