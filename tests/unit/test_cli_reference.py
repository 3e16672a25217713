"""docs/reference/cli.md is generated from the click commands: it must equal what they print."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from flowproof_cli.cli.main import COMMANDS
from tests.conftest import REPO


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_cli_reference", REPO / "scripts" / "gen_cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def test_the_committed_page_equals_the_commands() -> None:
    assert GEN.PAGE.read_text(encoding="utf-8") == GEN.render(), (
        "docs/reference/cli.md is stale: run .venv/bin/python scripts/gen_cli_reference.py"
    )


def test_every_command_and_option_is_on_the_page() -> None:
    page = GEN.render()
    for name in COMMANDS:
        assert f"## `flowproof {name}`" in page
    assert "-q, --quiet" in page and "--out FILE" in page
    assert "-h, --help" in page


def test_the_page_does_not_follow_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    assert GEN.render() == GEN.PAGE.read_text(encoding="utf-8")


def test_check_fails_on_a_stale_page(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "cli.md"
    stale.write_text("# CLI reference\n(old)\n")
    monkeypatch.setattr(GEN, "PAGE", stale)
    assert GEN.main(["--check"]) == 1
    assert "is stale: run .venv/bin/python scripts/gen_cli_reference.py" in capsys.readouterr().err
    assert GEN.main([]) == 0 and GEN.main(["--check"]) == 0  # regenerated, it is current
