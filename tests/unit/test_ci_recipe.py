"""The CI recipe (examples/ci/flowproof.yml, docs/ci.md): the workflow parses, its matrix
and its `--shard` agree, every command it runs exists with those options, and the trace
check fails, naming the record command, exactly when a flow has no trace."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from flowproof_cli.cli.main import cli
from flowproof_cli.runner.junit import JUNIT_PATH
from tests.conftest import REPO, clean_environ
from tests.e2e.flows import write_flow

WORKFLOW = REPO / "examples" / "ci" / "flowproof.yml"
CHECK = REPO / "examples" / "ci" / "require_traces.py"


def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def run_steps(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), *map(str, args)],
        env=clean_environ(),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_workflow_parses_with_a_trace_job_and_a_shard_matrix() -> None:
    document = workflow()
    assert document[True] == {"push": None, "pull_request": None}  # YAML 1.1 reads `on` as true
    assert set(document["jobs"]) == {"traces", "replay"}
    matrix = document["jobs"]["replay"]["strategy"]["matrix"]["shard"]
    assert matrix == list(range(1, len(matrix) + 1))
    (replay,) = [line for line in run_steps(document["jobs"]["replay"]) if "--shard" in line]
    assert f"--shard ${{{{ matrix.shard }}}}/{len(matrix)}" in replay


def test_the_junit_upload_is_where_the_replay_writes_it() -> None:
    job = workflow()["jobs"]["replay"]
    (upload,) = [step for step in job["steps"] if "upload-artifact" in step.get("uses", "")]
    (replay,) = [line for line in run_steps(job) if line.startswith("flowproof run")]
    folder = shlex.split(replay)[2]
    assert upload["with"]["path"] == (Path(folder) / JUNIT_PATH).as_posix()
    assert upload["if"] == "always()"
    assert "${{ matrix.shard }}" in upload["with"]["name"]  # one artifact per shard


@pytest.mark.parametrize("shard", [1, 2, 3, 4])
def test_every_flowproof_command_parses_with_its_options(
    shard: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the workflow's paths are relative to the checkout
    commands = [
        line.replace("${{ matrix.shard }}", str(shard))
        for job in workflow()["jobs"].values()
        for line in run_steps(job)
        if line.startswith("flowproof ")
    ]
    assert commands
    for command in commands:
        name, *args = shlex.split(command)[1:]
        context = click.Context(cli)
        found = cli.get_command(context, name)
        assert found is not None, command
        parsed = found.make_context(name, args)  # unknown options, bad values, missing paths
        assert parsed.params["shard"] is not None


def test_every_script_and_package_the_workflow_names_exists() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]
    for job in workflow()["jobs"].values():
        for line in run_steps(job):
            words = shlex.split(line)
            if words[0] == "python":
                assert (REPO / words[1]).is_file(), line
            elif words[:2] == ["pip", "install"]:
                assert words[2:] == [project], line
            else:
                assert words[0] == "flowproof", line


def test_the_trace_check_passes_when_every_flow_has_its_trace() -> None:
    result = check("specs")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "every flow has its trace\n"


def test_the_trace_check_fails_naming_each_flow_without_a_trace(tmp_path: Path) -> None:
    recorded = write_flow(tmp_path, name="recorded")
    recorded.with_name("recorded.trace.yaml").write_text("version: 1\n")
    missing = write_flow(tmp_path, name="missing")
    result = check(tmp_path)
    assert result.returncode == 1
    assert result.stdout == f"{missing}: no trace; record it: flowproof record {missing}\n"
    assert result.stderr == "1 flow(s) without a trace\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "usage: require_traces.py DIR [DIR ...]\n"),
        (("nowhere",), "nowhere: not a directory\n"),
    ],
)
def test_the_trace_check_refuses_bad_usage(args: tuple[str, ...], message: str) -> None:
    result = check(*args)
    assert result.returncode == 2
    assert result.stderr == message


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("flowproof run specs --shard 5/4", click.BadParameter),
        ("flowproof run specs --shards 1/4", click.NoSuchOption),
        ("flowproof run nowhere --shard 1/4", click.BadParameter),
    ],
)
def test_the_command_check_catches_a_broken_command(
    command: str, error: type[Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red path for the check above: what it would catch in a workflow."""
    monkeypatch.chdir(REPO)
    name, *args = shlex.split(command)[1:]
    found = cli.get_command(click.Context(cli), name)
    assert found is not None
    with pytest.raises(error):
        found.make_context(name, args)


def test_the_docs_show_the_workflow_file_as_it_is() -> None:
    docs = (REPO / "docs" / "ci.md").read_text()
    shown = docs.split("```yaml\n", 1)[1].split("```", 1)[0]
    body = "".join(
        line for line in WORKFLOW.read_text().splitlines(keepends=True) if not line.startswith("# ")
    )
    assert shown == body.lstrip("\n")
