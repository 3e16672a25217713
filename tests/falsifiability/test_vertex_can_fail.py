"""Vertex's new verdict forms can FAIL: the project, the location and the model of a Vertex
path are matched, so a replay whose agent names another one diverges naming it (exit 1),
while its twin (nothing changed) passes. Each base flow is recorded once, through the real
client, against the fake Vertex endpoint; each case is a copy with one agent setting
changed, as a code change would."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, set_agent_env, write_flow
from tests.fakes.vertex_upstream import VertexUpstream

pytestmark = pytest.mark.slow

pytest.importorskip("google.genai")
pytest.importorskip("anthropic.lib.vertex")

TOKEN = "ya29.vertex-falsifiability-token"
SCRIPTS = {"genai": "py_vertex_genai.py", "claude": "py_anthropic_vertex.py"}
AGENT_ENV = {
    "AGENT_PROJECT": "proj-a",
    "AGENT_LOCATION": "us-central1",
    "ANTHROPIC_VERTEX_PROJECT_ID": "proj-a",
    "CLOUD_ML_REGION": "us-east5",
}

#: (base, the agent setting changed, what the divergence must say)
CASES = {
    "genai-project": (
        "genai",
        {"AGENT_PROJECT": "proj-b"},
        "divergence at turn 1: request parameters changed: project: recorded proj-a, "
        "replayed proj-b",
    ),
    "genai-location": (
        "genai",
        {"AGENT_LOCATION": "europe-west4"},
        "divergence at turn 1: request parameters changed: location: recorded us-central1, "
        "replayed europe-west4",
    ),
    "genai-model": (
        "genai",
        {"AGENT_MODEL": "gemini-2.5-pro"},
        "divergence at turn 1: model changed",
    ),
    "claude-project": (
        "claude",
        {"ANTHROPIC_VERTEX_PROJECT_ID": "proj-b"},
        "divergence at turn 1: request parameters changed: project: recorded proj-a, "
        "replayed proj-b",
    ),
    "claude-region": (
        "claude",
        {"CLOUD_ML_REGION": "europe-west1"},
        "divergence at turn 1: request parameters changed: location: recorded us-east5, "
        "replayed europe-west1",
    ),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each base flow's folder, recorded once."""
    folders = {}
    for base, script in SCRIPTS.items():
        folder = tmp_path_factory.mktemp(f"vertex-{base}")
        spec = write_flow(folder, command=f"{sys.executable} {AGENTS / script}", env=AGENT_ENV)
        with VertexUpstream(token=TOKEN) as fake:
            result = run_cli(
                "record",
                spec,
                env={"FLOWPROOF_UPSTREAM_VERTEX": fake.base_url, "FLOWPROOF_KEY_VERTEX": TOKEN},
            )
        assert result.code == 0, result.output
        folders[base] = folder
    return folders


def _copy(recorded: dict[str, Path], base: str, where: Path) -> Path:
    folder = where / base
    shutil.copytree(recorded[base], folder)
    return folder / "weather.flow.yaml"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_changed_vertex_path_part_fails_naming_it(
    recorded: dict[str, Path], tmp_path: Path, name: str
) -> None:
    base, change, message = CASES[name]
    spec = _copy(recorded, base, tmp_path)
    set_agent_env(spec, **change)
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert message in result.stdout, result.stdout


@pytest.mark.parametrize("base", sorted(SCRIPTS))
def test_the_twin_passes(recorded: dict[str, Path], tmp_path: Path, base: str) -> None:
    result = run_cli("run", _copy(recorded, base, tmp_path))
    assert result.code == 0, result.output
