"""The project's own suite (specs/, replayed by `make test`) fails on a regression, and runs
where containment is unavailable by skipping only the contained flow."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from flowproof_cli.egress import unavailable_reason
from tests.conftest import REPO, clean_environ, run_cli

SPECS = REPO / "specs"


def suite_env(folder: Path) -> subprocess.CompletedProcess[str]:
    """Run specs/suite-env.sh as the suite's env_from does: in its folder, through sh."""
    return subprocess.run(
        ["/bin/sh", "-c", "./suite-env.sh"],
        cwd=folder,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_suite_env_puts_the_venv_first_and_says_whether_this_host_contains() -> None:
    result = suite_env(SPECS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"PATH={REPO}/.venv/bin:")
    assert ("SPECS_HOST_CONTAINS=yes" in lines) == (unavailable_reason() is None)


def test_suite_env_without_a_venv_stops_the_run_naming_the_bootstrap(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    shutil.copy(SPECS / "suite-env.sh", folder / "suite-env.sh")
    result = suite_env(folder)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"specs/suite-env.sh: {tmp_path}/.venv/bin/python is missing: "
        "run scripts/bootstrap.sh (make bootstrap)\n"
    )


def test_the_contained_flow_is_skipped_where_the_suite_does_not_vouch_for_containment(
    tmp_path: Path,
) -> None:
    for name in ("contained.flow.yaml", "contained.trace.yaml"):
        shutil.copy(SPECS / name, tmp_path / name)
    (tmp_path / "suite.yaml").write_text("")  # the nearest suite: no env_from, no variable
    result = run_cli("run", tmp_path, env={"SPECS_HOST_CONTAINS": ""})
    assert result.code == 0, result.output
    assert (
        "SKIP: Contained, the agent reaches nothing but the proxy - "
        "not set: SPECS_HOST_CONTAINS (skip_unless_env)"
    ) in result.stdout
    assert "0 passed, 0 failed, 1 skipped" in result.stdout


@pytest.mark.slow
def test_a_suite_flow_whose_agent_changed_fails_with_a_divergence() -> None:
    """AGENT_MODEL is read by the example agent: a changed model is a changed request."""
    result = run_cli("run", SPECS / "chat.flow.yaml", env={"AGENT_MODEL": "gpt-4o"})
    assert result.code == 1, result.output
    assert "FAIL: Chat Completions agent (openai SDK) reports the weather in Kyoto" in result.stdout
    assert "divergence at turn 1: model changed" in result.stdout
