"""A recorded two-turn conversation seen through every view, end to end: a real openai-SDK
chat loop recorded against the fake model, then the spec's second message changed. The
replay fails in turn 2 and every view says so (text, --json, JUnit, the run record); the
re-record's diff and `flowproof diff` name the changed turn; `flowproof show` heads each
turn with its message."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, agent_command
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

FIRST, SECOND, CHANGED = "My order 4711 has not arrived.", "Then cancel it, please.", "Cancel it."


def write_flow(folder: Path, second: str) -> Path:
    spec = {
        "name": "support",
        "app": "agent",
        "agent": {
            "command": agent_command(AGENTS / "py_chat_loop.py"),
            "env": {},
            "conversation": {"until": "^> $", "wait_first": True},
        },
        "steps": [{"user": FIRST}, {"assert": "reply contains 4711"}, {"user": second}],
    }
    path = folder / "support.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_conversation_fails_in_turn_two_and_every_view_names_it(tmp_path: Path) -> None:
    spec = write_flow(tmp_path, SECOND)
    trace = tmp_path / "support.trace.yaml"
    with FakeUpstream() as fake:
        env = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "sk-x1"}
        assert (result := run_cli("record", spec, env=env)).code == 0, result.output

        shown = run_cli("show", trace)
        assert shown.code == 0, shown.output
        lines = shown.stdout.splitlines()
        assert lines[1:3] == ["conversation: 2 turn(s)", f'conversation turn 1: "{FIRST}"']
        assert f'conversation turn 2: "{SECOND}"' in lines

        write_flow(tmp_path, CHANGED)
        ran = run_cli("run", tmp_path, "--json")
        assert ran.code == 1, ran.output
        (flow,) = json.loads(ran.stdout)["flows"]
        assert [(turn["turn"], turn["passed"]) for turn in flow["conversation"]] == [
            (1, True),
            (2, False),
        ]
        failed = f'conversation turn 2 ("{CHANGED}")'
        junit = ET.parse(tmp_path / ".flowproof" / "suite-junit.xml").find(".//failure")
        assert junit is not None
        assert junit.get("message", "").startswith(f"turns: 1 passed, 1 failed ({failed})")
        record = sorted((tmp_path / ".flowproof" / "runs").glob("*/report.json"))[-1]
        (row,) = json.loads(record.read_text())["flows"]
        assert row["conversation"][1]["failures"][0]["turn"] == 2

        text = run_cli("run", spec)
        assert text.code == 1
        assert f"    turns: 1 passed, 1 failed ({failed})" in text.stdout.splitlines()

        rerecorded = run_cli("record", spec, env=env)  # no terminal: left for review
        assert rerecorded.code == 1, rerecorded.output
        changed = f"~ conversation turn 2: {SECOND} -> {CHANGED}"
        said = [line.strip() for line in rerecorded.stdout.splitlines()]
        assert changed in said, rerecorded.output

    candidate = tmp_path / "support.trace.candidate.yaml"
    diffed = run_cli("diff", trace, candidate)
    assert diffed.code == 1
    assert f"    {changed}" in diffed.stdout.splitlines()
