"""`flowproof match learn SPEC` end to end: two real runs of an agent against the fake model.

The agent (tests/e2e/agents/py_volatile_agent.py) puts its working directory, HOME, today's
date in two forms, the clock and a fresh UUID into its requests. Learning must find a rule
for each, check them, and the rules pasted into the spec must make a recording replay from
another folder, HOME and day. Red paths: no spec, an agent that fails, runs that make
different numbers of requests, no upstream.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, clean_environ, run_cli
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AGENT = REPO / "tests" / "e2e" / "agents" / "py_volatile_agent.py"
FAKETIME = shutil.which("faketime")


def _project(root: Path, match: dict[str, object] | None = None, **agent_env: str) -> Path:
    folder = root / "weather-app"
    folder.mkdir(parents=True)
    shutil.copy(AGENT, folder / "agent.py")
    spec = {
        "name": "volatile weather",
        "app": "agent",
        "agent": {"command": 'python agent.py "${flowproof.prompt}"', "env": agent_env},
        "tools": [{"name": "get_weather"}],
        "steps": [
            {"prompt": "What's the weather in Nairobi?"},
            {"assert_tool_call": "get_weather where city equals Nairobi"},
            {"assert": "reply contains sunny"},
        ],
        **({"match": match} if match else {}),
    }
    path = folder / "weather.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _env(home: Path, fake: FakeUpstream | None = None) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    if fake is not None:
        env |= {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
    return env


def _learn(spec: Path, fake: FakeUpstream, *args: str):
    return run_cli(
        "match",
        "learn",
        spec.name,
        *args,
        env=_env(spec.parent.parent / "home", fake),
        cwd=spec.parent,
    )


def _on_day(day: str, *args: str | Path, env: dict[str, str], cwd: Path):
    """`flowproof ARGS` on another day, when faketime is there (else today)."""
    prefix = [FAKETIME, f"{day} 12:00:00"] if FAKETIME else []
    command = [*prefix, sys.executable, "-m", "flowproof_cli", *map(str, args)]
    return subprocess.run(
        command, env=clean_environ(env), cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_learned_rules_are_checked_and_make_a_replay_elsewhere_pass(tmp_path: Path) -> None:
    spec = _project(tmp_path / "laptop")
    with FakeUpstream() as fake:
        learned = _learn(spec, fake)
    assert learned.code == 0, learned.output
    out = learned.stdout
    assert "# Verified: with these rules, the 2 request(s) of the two runs are equal." in out
    assert "run 1 of 2 (in " in learned.stderr and "PASS: volatile weather" in learned.stderr
    block = yaml.safe_load(out)["match"]
    assert block["relocate"] is True
    kinds = set(re.findall(r"(?m)^    # (.*?), \d+ request\(s\)", out))
    assert "uuid" in kinds
    assert {"at": "metadata.session"}.items() <= next(
        rule for rule in block["normalize"] if rule["replace"] == "<uuid>"
    ).items()
    if FAKETIME:
        assert "33 days later" in out
        assert {
            "date (ISO 8601)",
            "date (weekday, month day, year)",
            "date (Python ctime)",
        } <= kinds
    else:
        assert "the date was not varied" in out
    # The call ids the fake model minted came back in request 2: the model's, no rule.
    assert "messages.2.tool_calls.0.id" in out and "need no rule" in out
    assert str(tmp_path) not in yaml.safe_dump(block)  # no path of the runs in the rules

    # Pasted into the spec: recorded on the laptop, replayed in CI, another day.
    written = yaml.safe_load(spec.read_text())
    written["match"] = block
    spec.write_text(yaml.safe_dump(written, sort_keys=False))
    with FakeUpstream() as fake:
        recorded = _on_day(
            "2026-11-30",
            "record",
            spec.name,
            env=_env(tmp_path / "laptop" / "home", fake),
            cwd=spec.parent,
        )
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    ci = tmp_path / "ci" / "checkout"
    shutil.copytree(spec.parent, ci)
    replayed = _on_day("2027-01-09", "run", spec.name, env=_env(tmp_path / "ci" / "home"), cwd=ci)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "PASS: volatile weather" in replayed.stdout

    # And without them, the same replay diverges: the rules are what made it pass.
    del written["match"]
    (ci / spec.name).write_text(yaml.safe_dump(written, sort_keys=False))
    diverged = _on_day("2027-01-09", "run", spec.name, env=_env(tmp_path / "ci" / "home"), cwd=ci)
    assert diverged.returncode == 1, diverged.stdout + diverged.stderr
    assert "divergence at turn 1" in diverged.stdout


def test_runs_with_different_request_counts_are_not_made_equal(tmp_path: Path) -> None:
    # The second run of the agent sees the marker the first left, and asks one more question.
    # The spec relocates already: what is learned is what it still needs beyond that.
    marker = str(tmp_path / "marker")
    spec = _project(tmp_path / "app", {"relocate": True}, VOLATILE_ONCE_MARKER=marker)
    with FakeUpstream() as fake:
        result = _learn(spec, fake, "--json")
    assert result.code == 1, result.output
    document = json.loads(result.stdout)
    assert document["exit_code"] == 1 and document["verified"] is False
    assert document["requests"] == [2, 3]
    assert {
        "request": 3,
        "reason": "only run 2 made this model request",
        "change": None,
    } in document["remaining"]
    assert [run["status"] for run in document["runs"]] == ["passed", "passed"]
    assert document["rules_in_force"] == [{"relocate": True, "from": "spec"}]
    assert "relocate" not in document["match"]  # in force already: not proposed again
    assert "<uuid>" in {rule["replace"] for rule in document["match"]["normalize"]}


def test_a_failing_agent_is_reported_and_nothing_is_learned(tmp_path: Path) -> None:
    spec = _project(tmp_path / "app", VOLATILE_CRASH="3")
    with FakeUpstream() as fake:
        result = _learn(spec, fake)
    assert result.code == 1, result.output
    assert "# run 1 failed: the agent exited with code 3" in result.stdout
    assert "# Nothing was learned: each run is a record, and a record must pass." in result.stdout
    assert "Traceback" not in result.output


def test_no_spec_and_no_upstream_are_usage_errors(tmp_path: Path) -> None:
    missing = run_cli("match", "learn", tmp_path / "nope.flow.yaml", env=_env(tmp_path / "home"))
    assert missing.code == 2, missing.output
    assert f"error: {tmp_path / 'nope.flow.yaml'}: file not found" in missing.stderr
    spec = _project(tmp_path / "app")
    no_upstream = run_cli("match", "learn", spec, env=_env(tmp_path / "home"))
    assert no_upstream.code == 2, no_upstream.output
    assert "error: record needs a real model to forward to" in no_upstream.stderr
    assert "Traceback" not in missing.output + no_upstream.output
