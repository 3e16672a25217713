"""The bootstrap finds a Python >= 3.12 by itself, and says so clearly when there is none."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.namespace_run import run_captured

OLD_PYTHON = Path("/usr/bin/python3.11")
pytestmark = pytest.mark.skipif(
    not OLD_PYTHON.exists() or Path("/usr/bin/python3.12").exists(),
    reason="needs a system Python older than 3.12 and none newer in /usr/bin",
)


def _bootstrap_copy(tmp_path: Path) -> Path:
    """The bootstrap script alone in an empty checkout, so it cannot reuse the real .venv."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    return tmp_path / "scripts" / "bootstrap.sh"


def _run(script: Path, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The bootstrap run with `home` as HOME, no pyenv, and `env` (PATH at least)."""
    variables = {"PYENV_ROOT": str(home / "no-pyenv"), "HOME": str(home), **env}
    return run_captured(["/bin/bash", script], timeout=60, env=variables)


def test_no_python_312_fails_clearly(tmp_path: Path) -> None:
    script = _bootstrap_copy(tmp_path)
    old_only = tmp_path / "bin"
    old_only.mkdir()
    (old_only / "python3").symlink_to(str(OLD_PYTHON))
    for tool in ("ip", "unshare", "nsenter", "setpriv", "gcc", "sha256sum", "cut", "cat"):
        if found := shutil.which(tool):
            (old_only / tool).symlink_to(found)
    result = _run(script, tmp_path, PATH=str(old_only))
    assert result.returncode == 2, result.stderr
    assert "flowproof needs Python >= 3.12" in result.stderr
    assert "FLOWPROOF_PYTHON" in result.stderr
    assert not (tmp_path / ".venv").exists()


def test_an_explicit_interpreter_that_is_too_old_is_not_taken(tmp_path: Path) -> None:
    """FLOWPROOF_PYTHON pointing at 3.11 is skipped, not used: the search goes on and fails."""
    script = _bootstrap_copy(tmp_path)
    result = _run(
        script, tmp_path, PATH="/usr/sbin:/usr/bin:/bin", FLOWPROOF_PYTHON=str(OLD_PYTHON)
    )
    assert result.returncode == 2, result.stderr
    assert "none was found" in result.stderr
