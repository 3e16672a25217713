"""The committed example flows replay offline (what `make demo` runs), and can still fail."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.slow

# The examples call a bare `python`, as a user's spec would: the venv's comes first.
VENV_PATH = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_committed_examples_replay_offline() -> None:
    result = run_cli("run", REPO / "examples", env=VENV_PATH)
    assert result.code == 0, result.output
    assert result.stdout.count("PASS: ") == 4
    assert "4 passed, 0 failed" in result.stdout


def test_an_edited_example_fails_with_a_divergence(tmp_path: Path) -> None:
    demo = tmp_path / "agent-demo"
    shutil.copytree(REPO / "examples" / "agent-demo", demo)
    spec = demo / "weather.flow.yaml"
    spec.write_text(spec.read_text().replace("in Nairobi right now", "in Paris right now"))
    result = run_cli("run", spec, env=VENV_PATH)
    assert result.code == 1, result.output
    assert "divergence at turn 1: message 1 (user) content changed" in result.stdout
