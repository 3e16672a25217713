"""suite.yaml end to end: its env reaches the agent and `${VAR}`, env_from, hooks around each
flow (after_each always), skip_unless_env, and the walk up from a spec to its suite.

One flow is recorded against the fake model per module; tests copy it (spec and trace).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.e2e.flows import DEFAULT_STEPS, traced_flow, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

LOG_HOOKS = (
    'before_each: echo "before $(basename "$FLOWPROOF_SPEC") $STAGE" >> hooks.log\n'
    'after_each: echo "after $(basename "$FLOWPROOF_SPEC")" >> hooks.log\n'
)


def suite(folder: Path, text: str) -> Path:
    path = folder / "suite.yaml"
    path.write_text(text)
    return path


def test_suite_env_reaches_the_agent(tmp_path: Path, recorded_trace: Path) -> None:
    spec = traced_flow(tmp_path, recorded_trace)
    assert run_cli("run", spec).code == 0
    suite(tmp_path, "env:\n  AGENT_MODEL: gpt-4o\n")  # the agent reads it: a changed request
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert "model changed: recorded gpt-4o-mini, replayed gpt-4o" in result.stdout


def test_env_from_feeds_variables_in_the_spec(tmp_path: Path, recorded_trace: Path) -> None:
    steps = [*DEFAULT_STEPS[:-1], {"assert": "reply contains ${WORD}"}]
    spec = traced_flow(tmp_path / "flows" / "deep", recorded_trace, steps=steps)
    result = run_cli("run", spec)
    assert result.code == 2
    assert "environment variable WORD is not set" in result.stderr
    suite(tmp_path, "env:\n  PREFIX: sun\nenv_from: echo WORD=${PREFIX}ny\n")
    result = run_cli("run", spec)  # found two folders up; env first, then env_from
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS: weather flow")


def test_record_uses_the_nearest_suite(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    (tmp_path / "flows").mkdir()
    spec = write_flow(tmp_path / "flows")
    suite(
        tmp_path,
        f"env_from: echo FLOWPROOF_AGENT_UPSTREAM={fake_upstream.base_url}/v1\n{LOG_HOOKS}",
    )
    result = run_cli("record", spec, env={"STAGE": "rec"})
    assert result.code == 0, result.output
    assert (tmp_path / "flows" / "weather.trace.yaml").exists()
    assert (
        tmp_path / "hooks.log"
    ).read_text() == "before weather.flow.yaml rec\nafter weather.flow.yaml\n"


def test_hooks_wrap_every_flow_and_after_each_follows_a_failure(
    tmp_path: Path, recorded_trace: Path
) -> None:
    traced_flow(tmp_path, recorded_trace, name="a_pass")
    traced_flow(tmp_path, recorded_trace, name="b_diverge", env={"AGENT_MODEL": "gpt-4o"})
    suite(tmp_path, "env:\n  STAGE: ci\n" + LOG_HOOKS)
    result = run_cli("run", tmp_path)
    assert result.code == 1, result.output
    assert "FAIL: b_diverge flow" in result.stdout
    assert (tmp_path / "hooks.log").read_text().splitlines() == [
        "before a_pass.flow.yaml ci",
        "after a_pass.flow.yaml",
        "before b_diverge.flow.yaml ci",
        "after b_diverge.flow.yaml",
    ]


def test_after_each_runs_after_an_error(tmp_path: Path, recorded_trace: Path) -> None:
    spec = traced_flow(tmp_path, recorded_trace, env={"X": "${NEVER_SET_ANYWHERE}"})
    suite(tmp_path, LOG_HOOKS)
    result = run_cli("run", spec)
    assert result.code == 2
    assert "environment variable NEVER_SET_ANYWHERE is not set" in result.stderr
    assert (tmp_path / "hooks.log").read_text().splitlines() == [
        "before weather.flow.yaml ",  # STAGE is not set here
        "after weather.flow.yaml",
    ]


def test_failing_before_each_fails_the_flow_naming_the_hook(
    tmp_path: Path, recorded_trace: Path
) -> None:
    spec = traced_flow(tmp_path, recorded_trace)
    suite(
        tmp_path,
        "before_each: echo db is down >&2; exit 3\nafter_each: echo after >> hooks.log\n",
    )
    result = run_cli("run", spec)
    assert result.code == 2, result.output
    assert result.stdout.startswith(
        "ERROR: weather flow - before_each hook `echo db is down >&2; exit 3` exited with code 3; "
        "its stderr ends with:\n    db is down"
    )
    assert (tmp_path / "hooks.log").read_text() == "after\n"


def test_failing_after_each_turns_a_pass_into_an_error(
    tmp_path: Path, recorded_trace: Path
) -> None:
    spec = traced_flow(tmp_path, recorded_trace)
    suite(tmp_path, "after_each: exit 5\n")
    result = run_cli("run", spec)
    assert result.code == 2
    assert (
        "ERROR: weather flow - after_each hook `exit 5` exited with code 5 (no stderr)"
        in result.stdout
    )


@pytest.mark.parametrize("target", ["spec", "dir"])
def test_failing_env_from_fails_the_run(tmp_path: Path, recorded_trace: Path, target: str) -> None:
    spec = traced_flow(tmp_path, recorded_trace)
    suite(tmp_path, "env_from: echo token expired >&2; exit 42\nbefore_each: touch ran\n")
    result = run_cli("run", spec if target == "spec" else tmp_path)
    assert result.code == 2
    assert "env_from command `echo token expired >&2; exit 42` exited with code 42" in result.stderr
    assert result.stderr.rstrip().endswith("its stderr ends with:\ntoken expired")
    assert not (tmp_path / "ran").exists()  # no flow started


def test_unknown_suite_key_names_file_and_line(tmp_path: Path, recorded_trace: Path) -> None:
    spec = traced_flow(tmp_path, recorded_trace)
    path = suite(tmp_path, "env: {}\nbefore: make db\n")
    for target in (spec, tmp_path):
        result = run_cli("run", target)
        assert result.code == 2
        assert f"{path}:2: unknown key `before` at the top level. Did you mean `before_each`?" in (
            result.stderr
        )


def test_skip_unless_env_skips_run_and_record(
    tmp_path: Path, recorded_trace: Path, fake_upstream: FakeUpstream
) -> None:
    spec = traced_flow(tmp_path, recorded_trace, skip_unless_env=["LIVE_KEY", "LIVE_REGION"])
    suite(tmp_path, "env:\n  LIVE_REGION: eu\n" + LOG_HOOKS)
    result = run_cli("run", spec)
    assert result.code == 0, result.output
    assert result.stdout == "SKIP: weather flow - not set: LIVE_KEY (skip_unless_env)\n"
    assert not (tmp_path / "hooks.log").exists()  # a skipped flow runs no hooks

    trace = tmp_path / "weather.trace.yaml"
    trace.unlink()
    upstream = f"{fake_upstream.base_url}/v1"
    result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": upstream})
    assert result.code == 0, result.output
    assert result.stdout.startswith("SKIP: weather flow - not set: LIVE_KEY")
    assert not trace.exists() and not fake_upstream.model_requests()

    result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": upstream, "LIVE_KEY": "k"})
    assert result.code == 0, result.output
    assert trace.exists()
    assert yaml.safe_load(trace.read_text())["flow"] == "weather flow"
