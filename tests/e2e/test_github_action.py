"""The GitHub Action (action.yml): its replay step, scripts/action-run.sh, run as the shell
script it is, with the checkout's `flowproof` on PATH, against a folder holding a flow that
passes from its trace and one whose prompt changed since it was recorded."""

from __future__ import annotations

import os
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_command

pytestmark = pytest.mark.slow

SCRIPT = REPO / "scripts" / "action-run.sh"
ACTION = REPO / "action.yml"
AGENT = REPO / "examples" / "agent-demo" / "weather_agent.py"


def _flow(folder: Path, name: str, city: str) -> None:
    """specs/chat.flow.yaml and its trace as `name`, asking about `city` (Kyoto: recorded)."""
    text = (REPO / "specs" / "chat.flow.yaml").read_text()
    text = text.replace(
        "python ../examples/agent-demo/weather_agent.py", f"{sys.executable} {AGENT}"
    )
    (folder / f"{name}.flow.yaml").write_text(text.replace("in Kyoto right", f"in {city} right"))
    shutil.copy(REPO / "specs" / "chat.trace.yaml", folder / f"{name}.trace.yaml")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`a_kyoto` passes; `b_oslo` diverges at turn 1 (sorted: shard 1/2 is a, 2/2 is b)."""
    folder = tmp_path_factory.mktemp("suite")
    _flow(folder, "a_kyoto", "Kyoto")
    _flow(folder, "b_oslo", "Oslo")
    return folder


def action_run(tmp_path: Path, **inputs: str) -> tuple[int, dict[str, str], str]:
    """The script's exit code, what it wrote to $GITHUB_OUTPUT, and its output."""
    outputs = tmp_path / "github-output"
    outputs.write_text("")
    env = {f"INPUT_{key.upper()}": value for key, value in inputs.items()}
    env["GITHUB_OUTPUT"] = str(outputs)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = run_command(["bash", SCRIPT], env, cwd=tmp_path, timeout=180)
    pairs = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    return done.code, pairs, done.output


def failed_cases(junit: str) -> list[bool]:
    """Whether each testcase of the JUnit file failed, in its order."""
    return [case.find("failure") is not None for case in ET.parse(junit).getroot().iter("testcase")]


def test_a_passing_shard_exits_0_and_names_its_junit_file(tmp_path: Path, suite: Path) -> None:
    code, outputs, said = action_run(tmp_path, path=str(suite), shard="1/2")
    assert code == 0, said
    assert f"flowproof run {suite} --shard 1/2" in said
    assert outputs["junit"] == f"{suite}/.flowproof/suite-junit.xml"
    assert outputs["artifact"] == "flowproof-junit-shard-1-of-2"
    assert failed_cases(outputs["junit"]) == [False]


def test_a_failing_flow_exits_1_and_its_junit_file_says_so(tmp_path: Path, suite: Path) -> None:
    code, outputs, said = action_run(tmp_path, path=str(suite), artifact_name="replay")
    assert code == 1, said
    assert "divergence at turn 1" in said
    assert outputs["artifact"] == "replay"
    assert sorted(failed_cases(outputs["junit"])) == [False, True]  # Kyoto, Oslo


def test_a_run_that_cannot_start_exits_2_with_no_stale_junit(tmp_path: Path, suite: Path) -> None:
    """A JUnit file of an earlier run in the same workspace is not uploaded as this one's."""
    assert action_run(tmp_path, path=str(suite), shard="2/2")[0] == 1  # Oslo: a report
    code, outputs, said = action_run(tmp_path, path=str(suite), shard="5/4")
    assert code == 2
    assert "Invalid value for '--shard'" in said
    assert outputs["junit"] == ""
    assert "wrote no JUnit file" in said


def test_the_action_runs_the_script_with_its_inputs_as_environment() -> None:
    """What the script reads is what action.yml's steps pass it (never pasted into code)."""
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    (replay,) = [step for step in steps if step.get("id") == "replay"]
    assert replay["run"] == 'bash "$GITHUB_ACTION_PATH/scripts/action-run.sh"'
    for key, value in replay["env"].items():
        name = key.removeprefix("INPUT_").lower().replace("_", "-")
        assert value == f"${{{{ inputs.{name} }}}}"
        assert name in action["inputs"]
        assert key in SCRIPT.read_text()
    for step in steps:
        assert "${{ inputs." not in step.get("run", "")  # inputs travel as env only
    (upload,) = [step for step in steps if "upload-artifact" in step.get("uses", "")]
    assert upload["with"]["path"] == "${{ steps.replay.outputs.junit }}"
    assert upload["if"].startswith("always()")


def test_the_ci_page_uses_the_action_with_its_real_inputs() -> None:
    """docs/ci.md's workflow: every `with:` of the action is an input action.yml declares,
    and its input table lists exactly those inputs."""
    page = (REPO / "docs" / "ci.md").read_text()
    (block,) = [b.split("```")[0] for b in page.split("```yaml\n")[1:] if "OWNER/flowproof@" in b]
    steps = yaml.safe_load(block)["jobs"]["replay"]["steps"]
    (used,) = [step for step in steps if step.get("uses", "").startswith("OWNER/flowproof@")]
    inputs = yaml.safe_load(ACTION.read_text())["inputs"]
    assert set(used["with"]) <= set(inputs)
    table = {line.split("`")[1] for line in page.splitlines() if line.startswith("| `")}
    assert set(inputs) <= table
