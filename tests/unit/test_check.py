"""`flowproof check`: every outcome (current, load error, each kind of stale trace) from
small specs and hand-built traces in a temporary folder, no agent and no proxy."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from flowproof_cli import trace as traces
from flowproof_cli.cli.main import cli
from flowproof_cli.runner.discovery import nearest_suite
from flowproof_cli.runner.flow import _match_rules
from flowproof_cli.runner.staleness import spec_path_of_trace, staleness
from flowproof_cli.spec import load_spec
from flowproof_cli.spec.suite import load_suite
from flowproof_cli.trace.conversation import RecordedConversation
from tests.conftest import REPO, run_cli
from tests.unit.trace_builders import chat_trace

MOCK = {"now": "2026-01-01T09:00:00Z"}
FAULT = {"at": "model call 1", "answer": 429}
IGNORE = {"ignore": ["$.messages[*].content"]}


def write_spec(folder: Path, name: str = "w", **extra: Any) -> Path:
    """A one-turn spec with a mocked tool; `extra` replaces or adds top-level keys."""
    spec: dict[str, Any] = {
        "name": "weather",
        "app": "agent",
        "agent": {"command": "python agent.py"},
        "tools": [{"name": "get_time", "result": MOCK}, {"name": "get_weather"}],
        "steps": [{"prompt": "What's the weather in Nairobi?"}],
        **extra,
    }
    path = folder / f"{name}.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def write_trace(spec_path: Path, **extra: Any) -> Path:
    """The spec's trace, recorded with its mocks and nothing else unless `extra` says."""
    fields: dict[str, Any] = {"mocks": {"get_time": MOCK}, **extra}
    path = traces.trace_path_for(spec_path)
    traces.save(path, chat_trace(**fields))
    return path


def check(*args: str | Path, cwd: Path | None = None) -> tuple[int, str]:
    previous = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner().invoke(cli, ["check", *map(str, args)])
    finally:
        os.chdir(previous)
    return result.exit_code, result.output


def test_a_current_flow_passes(tmp_path: Path) -> None:
    write_trace(write_spec(tmp_path))
    code, out = check(tmp_path)
    assert code == 0, out
    assert out.strip() == "checked 1 flow(s) and 0 suite(s): 1 current, 0 stale, 0 error(s)"


def test_the_default_path_is_the_current_folder(tmp_path: Path) -> None:
    write_spec(tmp_path)
    code, out = check(cwd=tmp_path)
    assert code == 1 and "no trace at w.trace.yaml" in out


def test_every_load_error_is_reported_with_its_line_and_exit_2(tmp_path: Path) -> None:
    good = write_spec(tmp_path, "good")
    write_trace(good)
    (tmp_path / "a.flow.yaml").write_text("name: a\napp: agent\nstepz: []\n")
    (tmp_path / "b.flow.yaml").write_text("name: b\napp: agent\nagent: {comand: x}\nsteps: []\n")
    code, out = check(tmp_path)
    assert code == 2, out
    assert re.search(r"error: \S*a\.flow\.yaml:3: unknown key `stepz`.*Did you mean `steps`", out)
    assert re.search(r"error: \S*b\.flow\.yaml:3: .*comand", out)
    assert "1 current, 0 stale, 2 error(s)" in out


def test_a_missing_trace_is_stale_naming_the_record_command(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    code, out = check(spec)
    assert code == 1, out
    assert out.splitlines()[0] == (
        f"stale: {spec}: no trace at {tmp_path / 'w.trace.yaml'}. Fix: flowproof record {spec}"
    )


def test_a_trace_recorded_under_other_mocks_is_stale(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    write_trace(spec, mocks={"get_time": {"now": "2025-12-31T23:00:00Z"}})
    code, out = check(spec)
    assert code == 1, out
    assert "its tools' mocks differ from the recorded ones (get_time)" in out
    assert f"Fix: flowproof record {spec}" in out


def test_a_trace_recorded_under_other_faults_is_stale(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, faults=[FAULT])
    write_trace(spec)
    code, out = check(spec)
    assert code == 1, out
    assert (
        "its faults differ from the recorded ones (recorded: none; now: model call 1: answer: 429)"
        in out
    )


def test_a_trace_recorded_with_the_spec_faults_is_current(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, faults=[FAULT])
    write_trace(spec, faults=load_spec(spec).fault_plan)
    assert check(spec)[0] == 0


def test_a_trace_recorded_under_other_match_rules_is_stale(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, match=IGNORE)
    write_trace(spec)
    code, out = check(spec)
    assert code == 1, out
    assert (
        "the match rules it runs with differ from the recorded ones (recorded only: none; now "
        "only: ignore $.messages[*].content (spec))" in out
    )


def test_a_presets_changed_rules_are_a_note_not_stale(tmp_path: Path) -> None:
    """The replay applies today's preset to the recorded requests: still current."""
    spec = write_spec(tmp_path, match={"presets": ["dates"]})
    old_rule = {"from": "preset dates", "normalize": {"pattern": "x", "replace": "<date>"}}
    write_trace(spec, match=[old_rule])
    code, out = check(spec)
    assert code == 0, out
    assert "note: " in out and "the preset dates's rules changed since it was recorded" in out
    # Red: a preset the spec no longer names is a declared rule gone, so the trace is stale.
    write_trace(spec, match=[{**old_rule, "from": "preset claude-code"}])
    code, out = check(spec)
    assert code == 1 and "recorded only: preset claude-code" in out, out


def test_a_suite_match_rule_counts_and_a_recorded_one_is_current(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({"match": IGNORE}))
    spec = write_spec(tmp_path)
    write_trace(spec, match=[{"ignore": "$.messages[*].content", "from": "suite"}])
    assert check(tmp_path) == (
        0,
        "checked 1 flow(s) and 1 suite(s): 1 current, 0 stale, 0 error(s)\n",
    )


def test_the_rules_compared_are_the_ones_a_run_builds(tmp_path: Path) -> None:
    """check's snapshot equals the one `run_flow` builds for the same suite and spec."""
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({"match": {"presets": ["dates"]}}))
    spec_path = write_spec(tmp_path, match={**IGNORE, "relocate": True})
    spec = load_spec(spec_path)
    suite = nearest_suite(spec_path)
    assert suite is not None
    declared = load_suite(suite).match
    assert declared is not None
    blocks = (declared.declared(tmp_path, "suite"),)
    rules, _ = _match_rules(spec, blocks, tmp_path, {}, 10.0)
    write_trace(spec_path, match=rules.snapshot())
    assert staleness(spec, spec_path, traces.trace_path_for(spec_path), blocks).differences == []
    assert len(rules.snapshot()) > 2  # the preset's, the spec's, the relocation


def test_matcher_addon_rules_are_left_to_the_replay(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    write_trace(spec, match=[{"addon": "StripSession", "from": "spec"}])
    assert check(spec)[0] == 0


def test_a_conversation_recorded_as_one_turn_is_stale(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        agent={"command": "python agent.py", "conversation": {"until": "^> $"}},
        steps=[{"user": "hi"}, {"user": "bye"}],
    )
    write_trace(spec)
    code, out = check(spec)
    assert code == 1, out
    assert "it is a conversation (it has `user:` steps) but was recorded as a one-turn flow" in out


def test_a_one_turn_flow_recorded_as_a_conversation_is_stale(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    write_trace(spec, conversation=RecordedConversation("c1", ("hi",), (False,), ()))
    code, out = check(spec)
    assert code == 1, out
    assert "it is a one-turn flow (no `user:` steps) but was recorded as a conversation" in out


def test_every_difference_of_a_flow_is_on_its_one_line(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, faults=[FAULT], match=IGNORE)
    write_trace(spec, mocks={})
    code, out = check(spec)
    stale = [line for line in out.splitlines() if line.startswith("stale:")]
    assert code == 1 and len(stale) == 1
    assert stale[0].count("differ from the recorded ones") == 3


def test_a_changed_trace_checks_its_spec(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, faults=[FAULT])
    trace = write_trace(spec)
    assert spec_path_of_trace(trace) == spec
    code, out = check(trace, spec)  # both named, as pre-commit does: checked once
    assert code == 1 and out.count("stale:") == 1 and "checked 1 flow(s)" in out


def test_a_trace_without_a_spec_is_skipped(tmp_path: Path) -> None:
    orphan = tmp_path / "orphan.trace.yaml"
    traces.save(orphan, chat_trace())
    code, out = check(orphan)
    assert code == 0, out
    assert f"skipped: {orphan}: no spec orphan.flow.yaml beside it" in out


def test_an_unreadable_trace_is_a_load_error_with_its_line(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    trace = write_trace(spec)
    trace.write_text(trace.read_text().replace("flowproof_trace: 2", "flowproof_trace: 99"))
    code, out = check(spec)
    assert code == 2, out
    assert "trace format version 99 is not supported" in out


def test_a_broken_suite_is_reported_and_its_flows_not_compared(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text("env: {}\nbefore_eech: x\n")
    write_spec(tmp_path)
    code, out = check(tmp_path)
    assert code == 2, out
    assert re.search(r"suite\.yaml:2: unknown key `before_eech`", out)
    assert "not compared with its trace: its suite" in out


def test_json_lists_the_findings(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    code, out = check("--json", spec)
    document = json.loads(out)
    assert code == 1 and document["exit_code"] == 1
    assert document["stale"] == [
        {
            "spec": str(spec),
            "trace": str(tmp_path / "w.trace.yaml"),
            "differences": [f"no trace at {tmp_path / 'w.trace.yaml'}"],
            "fix": f"flowproof record {spec}",
        }
    ]


def test_the_project_specs_are_current() -> None:
    done = run_cli("check", "specs")
    assert done.code == 0, done.output
    assert "0 stale, 0 error(s)" in done.stdout


# -- the pre-commit hook ---------------------------------------------------------------------------


def _hook() -> dict[str, Any]:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hook, dict)
    return hook


@pytest.mark.parametrize(
    ("path", "checked"),
    [
        ("a/w.flow.yaml", True),
        ("suite.yaml", True),
        ("flows/suite.yaml", True),
        ("a/w.trace.yaml", True),
        ("a/mysuite.yaml", False),
        ("a/w.trace.candidate.yaml", False),
        ("README.md", False),
    ],
)
def test_the_hook_passes_flow_files_only(path: str, checked: bool) -> None:
    assert bool(re.search(_hook()["files"], path)) is checked


def test_the_hook_runs_check_on_the_changed_files(tmp_path: Path) -> None:
    hook = _hook()
    assert hook["id"] == "flowproof-check" and hook["pass_filenames"] is True
    program, *args = hook["entry"].split()
    assert program == "flowproof"
    spec = write_spec(tmp_path, faults=[FAULT])
    trace = write_trace(spec)
    done = run_cli(*args, trace.relative_to(tmp_path), cwd=tmp_path)
    assert done.code == 1, done.output
    assert "stale: w.flow.yaml: its faults differ" in done.stdout
    write_trace(spec, faults=load_spec(spec).fault_plan)
    assert run_cli(*args, trace.relative_to(tmp_path), cwd=tmp_path).code == 0
