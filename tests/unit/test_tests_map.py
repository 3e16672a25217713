"""tests/README.md's module map stays true: every source module has a row naming the test
modules that exercise it, and every row names a module and tests that exist.

A row is one line of the map's table, the module first, then its tests, each in backticks
(other backticked words in the cell, not under `tests/`, are notes):

    | `flowproof_cli/canonical.py` | `tests/unit/test_grammar.py`, `tests/e2e/test_x.py`; note |
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

README = REPO / "tests" / "README.md"
SECTION = "## Module map"
ROOTS = ("flowproof_cli", "addons")
_CODE = re.compile(r"`([^`]+)`")


def map_rows(markdown: str) -> dict[str, list[str]]:
    """Module -> the tests its row names, from the table under the SECTION heading."""
    rows: dict[str, list[str]] = {}
    inside = False
    for line in markdown.splitlines():
        if line.startswith("## "):
            inside = line.strip() == SECTION
            continue
        cells = line.strip().strip("|").split("|")
        if not inside or not line.lstrip().startswith("|") or len(cells) < 2:
            continue
        module = _CODE.findall(cells[0])
        if module:
            named = _CODE.findall("|".join(cells[1:]))
            rows[module[0]] = [item for item in named if item.startswith("tests/")]
    return rows


def _has_code(path: Path) -> bool:
    """More than a docstring and `from __future__` (an empty package marker needs no row)."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return any(not _is_boilerplate(node) for node in body)


def _is_boilerplate(node: ast.stmt) -> bool:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def source_modules(repo: Path) -> list[str]:
    return sorted(
        path.relative_to(repo).as_posix()
        for root in ROOTS
        for path in (repo / root).rglob("*.py")
        if _has_code(path)
    )


def problems(rows: dict[str, list[str]], modules: list[str], repo: Path) -> list[str]:
    """What makes the map untrue, each with its fix."""
    found = [
        f"{module}: no row in {SECTION!r}. Fix: add a row for it naming the test modules "
        "that exercise it"
        for module in modules
        if module not in rows
    ]
    found += [
        f"{module}: the map names a module that no longer exists. Fix: remove or rename its row"
        for module in rows
        if not (repo / module).is_file()
    ]
    for module, tests in rows.items():
        if not tests:
            found.append(f"{module}: its row names no test module. Fix: name at least one")
        found += [
            f"{module}: its row names {test}, which does not exist. Fix: correct the path"
            for test in tests
            if not (repo / test.split("::", 1)[0]).exists()
        ]
    return found


def test_the_map_covers_every_source_module_and_names_real_tests() -> None:
    found = problems(map_rows(README.read_text(encoding="utf-8")), source_modules(REPO), REPO)
    if found:
        pytest.fail(f"{README} is out of date:\n" + "\n".join(found), pytrace=False)


def test_a_missing_row_a_stale_row_a_wrong_path_and_no_test_are_each_named(
    tmp_path: Path,
) -> None:
    (tmp_path / "flowproof_cli").mkdir()
    (tmp_path / "flowproof_cli" / "__init__.py").write_text(
        '"""Only a docstring."""\n\nfrom __future__ import annotations\n'
    )
    (tmp_path / "flowproof_cli" / "a.py").write_text("A = 1\n")
    (tmp_path / "flowproof_cli" / "b.py").write_text("B = 2\n")
    (tmp_path / "flowproof_cli" / "c.py").write_text("C = 3\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    markdown = "\n".join(
        [
            "# Tests",
            "| `flowproof_cli/a.py` | `tests/test_a.py` |",  # outside the section: ignored
            SECTION,
            "| Module | Tested by |",
            "|---|---|",
            "| `flowproof_cli/a.py` | `tests/test_a.py`, `tests/test_gone.py`; see `a.py` |",
            "| `flowproof_cli/old.py` | `tests/test_a.py` |",
            "| `flowproof_cli/c.py` | only a `note` |",
            "## Markers",
            "| `flowproof_cli/b.py` | `tests/test_a.py` |",  # another section: ignored
        ]
    )
    rows = map_rows(markdown)
    assert rows == {
        "flowproof_cli/a.py": ["tests/test_a.py", "tests/test_gone.py"],
        "flowproof_cli/old.py": ["tests/test_a.py"],
        "flowproof_cli/c.py": [],
    }
    modules = source_modules(tmp_path)
    assert modules == [f"flowproof_cli/{name}.py" for name in "abc"]  # no row for the marker
    assert problems(rows, modules, tmp_path) == [
        f"flowproof_cli/b.py: no row in {SECTION!r}. Fix: add a row for it naming the test "
        "modules that exercise it",
        "flowproof_cli/old.py: the map names a module that no longer exists. Fix: remove or "
        "rename its row",
        "flowproof_cli/a.py: its row names tests/test_gone.py, which does not exist. Fix: "
        "correct the path",
        "flowproof_cli/c.py: its row names no test module. Fix: name at least one",
    ]
