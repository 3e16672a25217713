"""Packaging: every package is listed, `addons/` ships as `flowproof_addons`, never bare."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def source_packages() -> set[str]:
    """Dotted names of every directory under flowproof_cli/ holding an __init__.py."""
    return {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "flowproof_cli").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_every_package_directory_is_listed() -> None:
    listed = set(SETUPTOOLS["packages"])
    found = source_packages()
    assert "flowproof_cli" in found
    assert "flowproof_cli.cassette" in found
    missing = sorted(found - listed)
    assert missing == [], f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert "flowproof_addons" in listed
    assert "addons" not in listed


def test_addons_are_mapped_to_flowproof_addons() -> None:
    assert SETUPTOOLS["package-dir"]["flowproof_addons"] == "addons"
    assert (REPO / "addons" / "__init__.py").is_file()


def test_model_addon_module_defines_an_addons_list() -> None:
    from flowproof_addons import conversation, guard, model

    assert isinstance(model.addons, list)
    assert [type(addon) for addon in model.addons] == [
        guard.RequestGuard,
        model.ModelBoundary,
        conversation.ConversationViews,
        guard.Backstop,
    ]
    assert isinstance(guard.addons, list)
    assert [type(addon) for addon in guard.addons] == [guard.RequestGuard]


def _copy_sources(target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, target / name)
    shutil.copytree(REPO / "flowproof_cli", target / "flowproof_cli", ignore=ignore)
    shutil.copytree(REPO / "flowproof", target / "flowproof", ignore=ignore)
    shutil.copytree(REPO / "addons", target / "addons", ignore=ignore)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("setuptools", "wheel"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed in this environment (needed to build offline)")
    source = tmp_path_factory.mktemp("source")
    out = tmp_path_factory.mktemp("wheelhouse")
    _copy_sources(source)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    wheels = list(out.glob("flowproof-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def wheel_names(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        return archive.namelist()


def test_wheel_ships_addons_as_flowproof_addons(wheel: Path) -> None:
    names = wheel_names(wheel)
    assert "flowproof_addons/__init__.py" in names
    assert "flowproof_addons/model.py" in names
    assert "flowproof_addons/guard.py" in names
    assert [name for name in names if name.startswith("addons/")] == []
    top_level = {name.split("/", 1)[0] for name in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {
        "flowproof",  # the small public API (`import flowproof`)
        "flowproof_cli",
        "flowproof_addons",
    }


def test_wheel_contains_every_source_module(wheel: Path) -> None:
    names = set(wheel_names(wheel))
    expected = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "flowproof_cli").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    expected |= {"flowproof_addons/" + path.name for path in (REPO / "addons").glob("*.py")}
    assert sorted(expected - names) == []
    assert "flowproof_cli/py.typed" in names


def test_wheel_declares_the_console_script(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        entry_points = next(n for n in archive.namelist() if n.endswith("entry_points.txt"))
        text = archive.read(entry_points).decode()
    assert "flowproof = flowproof_cli.cli.entry:main" in text  # quiet while loading
    assert "[pytest11]\nflowproof = flowproof_cli.pytest_plugin" in text  # docs/pytest.md
