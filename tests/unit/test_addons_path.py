"""`flowproof addons path`: the installed addon scripts, found without importing them, so
`mitmdump -s "$(flowproof addons path model)"` works with only the installed package."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from flowproof_cli.cli.addons import SCRIPTS
from tests.conftest import REPO, run_cli, run_command
from tests.unit.test_import_budget import HEAVY, loaded_by, over_budget


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_name_prints_the_script_that_loads_into_stock_mitmproxy(name: str) -> None:
    done = run_cli("addons", "path", name, cwd=Path("/"))
    assert done.code == 0, done.output
    printed = Path(done.stdout.strip())
    assert printed.is_absolute()
    assert printed == (REPO / "addons" / f"{name}.py").resolve()  # the editable install's
    module = ast.parse(printed.read_text())
    assigned = [
        target.id
        for node in module.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    ]
    assert "addons" in assigned  # mitmproxy loads a script's top-level `addons` list


def test_no_name_prints_the_folder() -> None:
    done = run_cli("addons", "path", cwd=Path("/"))
    assert done.code == 0, done.output
    assert Path(done.stdout.strip()) == (REPO / "addons").resolve()


def test_an_unknown_name_is_exit_2_naming_the_valid_ones() -> None:
    done = run_cli("addons", "path", "modle")
    assert done.code == 2
    assert "'modle' is not one of 'model', 'mcp_http'" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_lookup_imports_no_addon_and_no_mitmproxy(tmp_path: Path) -> None:
    modules = loaded_by(tmp_path, "addons", "path", "model")
    assert "flowproof_cli.cli.addons" in modules  # it did run the command
    assert over_budget(modules, (*HEAVY, "pydantic", "flowproof_cli.runner")) == []


def test_without_the_package_it_is_exit_2_saying_to_reinstall(tmp_path: Path) -> None:
    """Red path: an install that lost flowproof_addons (a broken or partial copy)."""
    probe = (
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'flowproof_addons' "
        "else real(name, *a)\n"
        "sys.argv = ['flowproof', 'addons', 'path', 'model']\n"
        "from flowproof_cli.cli.main import main\n"
        "main()\n"
    )
    done = run_command([sys.executable, "-c", probe])
    assert done.code == 2
    assert "error: the package flowproof_addons is not installed beside flowproof_cli. Fix: " in (
        done.stderr
    )
