"""The agent's working directory is whole: it runs in its spec's folder and `PWD` says so.

An agent that takes its working directory from `PWD` (a shell script, opencode) puts it
into its requests. Recorded once, from the repository root, its trace must replay from
anywhere: the root, the spec's own folder, an unrelated folder, as one spec or a directory.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.e2e.flows import AGENTS
from tests.e2e.mcp_flows import NO_MODEL, NOTES_V2, PY, client
from tests.e2e.mcp_flows import write_flow as write_mcp_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AGENT = AGENTS / "py_pwd_agent.py"


def write_spec(folder: Path, env: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True)
    spec = {
        "name": "pwd flow",
        "app": "agent",
        "agent": {
            "command": f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}",
            "env": env or {},
        },
        "steps": [{"prompt": "Where do you work?"}],
    }
    path = folder / "pwd.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def from_shell(cwd: Path, **env: str) -> dict[str, str]:
    """The environment of a flowproof started by a shell in `cwd`: its `PWD` names `cwd`."""
    return {"PWD": str(cwd), **env}


def record_from(root: Path, spec: str) -> None:
    with FakeUpstream(seed=1) as fake:
        upstream = f"{fake.base_url}/v1"
        result = run_cli(
            "record", spec, cwd=root, env=from_shell(root, FLOWPROOF_AGENT_UPSTREAM=upstream)
        )
    assert result.code == 0, result.output


def test_recorded_once_it_replays_from_every_folder(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "app", tmp_path / "elsewhere"
    spec = write_spec(root / "specs" / "sub")
    elsewhere.mkdir()
    record_from(root, "specs/sub/pwd.flow.yaml")
    folder = os.path.realpath(spec.parent)
    trace = spec.with_name("pwd.trace.yaml").read_text()
    assert f"You work in {folder}." in trace  # the spec's folder, not the caller's

    runs = [
        (root, ["specs/sub/pwd.flow.yaml"]),  # the repository root, as CI starts
        (spec.parent, ["pwd.flow.yaml"]),  # the spec's own folder
        (elsewhere, [str(spec)]),  # an unrelated folder, one spec
        (elsewhere, ["../app/specs"]),  # ... and the directory, relative to it
    ]
    for cwd, args in runs:
        result = run_cli("run", *args, "--json", cwd=cwd, env=from_shell(cwd))
        assert result.code == 0, (cwd, args, result.output)
        (flow,) = yaml.safe_load(result.stdout)["flows"]
        assert flow["stdout_tail"].startswith(f"PWD={folder} getcwd={folder}\n"), flow


def test_a_pwd_naming_the_callers_folder_diverges(tmp_path: Path) -> None:
    """The old behaviour, restored by hand (`PWD: ${PWD}` hands the agent flowproof's own):
    recorded from the root, the replay from elsewhere diverges on the folder it names."""
    root, elsewhere = tmp_path / "app", tmp_path / "elsewhere"
    spec = write_spec(root / "specs" / "sub", env={"PWD": "${PWD}"})
    elsewhere.mkdir()
    record_from(root, "specs/sub/pwd.flow.yaml")

    result = run_cli("run", str(spec), cwd=elsewhere, env=from_shell(elsewhere))
    assert result.code == 1, result.output
    assert "divergence at turn 1: message 0 (system) content changed" in result.stdout
    assert f"recorded: You work in {root}." in result.stdout
    assert f"replayed: You work in {elsewhere}." in result.stdout


#: A stdio MCP server that notes its PWD and working directory, then becomes the notes server.
PWD_SERVER = f"""
import os, sys
with open(os.environ["PWD_LOG"], "a") as log:
    log.write(f"PWD={{os.environ.get('PWD')}} getcwd={{os.getcwd()}}\\n")
os.execv(sys.executable, [sys.executable, {str(NOTES_V2)!r}])
"""


def test_a_stdio_mcp_server_runs_in_the_specs_folder_from_a_relative_spec(
    tmp_path: Path,
) -> None:
    """`record specs/sub/x.flow.yaml` from the root: the real server starts in the spec's
    folder (its path was relative to the root, the stand-in runs where the agent is) and
    its PWD names that folder."""
    root = tmp_path / "app"
    folder = root / "specs" / "sub"
    folder.mkdir(parents=True)
    (folder / "pwd_server.py").write_text(PWD_SERVER)
    log = tmp_path / "pwd.log"
    agent = client("py_client_v2.py", "--mode", "legacy", "--steps", "write,read")
    env = {"NOTES_DIR": str(tmp_path / "notes"), "PWD_LOG": str(log)}
    write_mcp_flow(folder, agent, [{"name": "notes", "command": f"{PY} pwd_server.py"}], env=env)

    result = run_cli(
        "record", "specs/sub/mcp.flow.yaml", cwd=root, env=from_shell(root, **NO_MODEL)
    )
    assert result.code == 0, result.output
    real = os.path.realpath(folder)
    assert log.read_text() == f"PWD={real} getcwd={real}\n"
