"""Size limits on the source, read from the AST: no class over 300 lines, no function over 60.

A long function or class is where a change needs the most reading and breaks the most
things; the limits keep each piece small enough to review whole. Lines are counted from
the `def`/`class` line to the last line of its body (decorators excluded), so comments and
docstrings inside count too. Nested functions and methods are measured on their own as well.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

ROOTS = ("flowproof_cli", "addons")
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 60

#: Deliberate exceptions, "path/to/module.py:Qualified.name" -> why it must stay long.
#: Starts empty: add an entry only with a reason a reviewer would accept (a table that
#: reads best whole, generated code), never to make the test pass for now.
EXCEPTIONS: dict[str, str] = {}


@dataclass(frozen=True)
class Offender:
    key: str  # module:qualname, the EXCEPTIONS key
    kind: str  # "class" or "function"
    line: int
    length: int

    @property
    def limit(self) -> int:
        return MAX_CLASS_LINES if self.kind == "class" else MAX_FUNCTION_LINES

    def describe(self) -> str:
        module, name = self.key.split(":", 1)
        fix = (
            "split it into smaller classes, each owning one concern"
            if self.kind == "class"
            else "extract named steps into helper functions"
        )
        return (
            f"{module}:{self.line}: {self.kind} {name} is {self.length} lines "
            f"(limit {self.limit}). Fix: {fix}, or add '{self.key}' to EXCEPTIONS with a reason"
        )


def _measured(tree: ast.Module, module: str) -> list[Offender]:
    """Every class and function of one module, with its qualified name and length."""
    found: list[Offender] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                found.append(Offender(f"{module}:{name}", kind, child.lineno, length))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _modules() -> list[Path]:
    return sorted(path for root in ROOTS for path in (REPO / root).rglob("*.py"))


def offenders() -> list[Offender]:
    too_long = []
    for path in _modules():
        module = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=module)
        too_long += [o for o in _measured(tree, module) if o.length > o.limit]
    return too_long


def test_no_class_or_function_is_over_its_size_limit() -> None:
    found = [o for o in offenders() if o.key not in EXCEPTIONS]
    if found:
        pytest.fail("too long:\n" + "\n".join(o.describe() for o in found), pytrace=False)


def test_every_exception_still_names_a_long_definition() -> None:
    """An entry whose definition was shortened, renamed or removed is stale: drop it."""
    current = {o.key for o in offenders()}
    stale = sorted(set(EXCEPTIONS) - current)
    assert not stale, f"stale EXCEPTIONS entries in {__file__}, remove them: {stale}"


def test_the_measure_counts_nested_definitions_and_names_them() -> None:
    """Red path of the measure itself: a long method and a long nested function are both
    found, by qualified name, with their length and the fix."""
    statements = [f"x = {n}" for n in range(MAX_FUNCTION_LINES)]
    lines = [
        "class Big:",
        "    def run(self):",
        *(f"        {s}" for s in statements),
        "        def inner():",
        *(f"            {s}" for s in statements),
    ]
    measured = {o.key: o for o in _measured(ast.parse("\n".join(lines)), "m.py")}
    run, inner = measured["m.py:Big.run"], measured["m.py:Big.run.inner"]
    assert run.length == 2 * MAX_FUNCTION_LINES + 2 and run.length > run.limit
    assert inner.length == MAX_FUNCTION_LINES + 1 and inner.length > inner.limit
    assert measured["m.py:Big"].length < MAX_CLASS_LINES
    assert run.describe() == (
        f"m.py:2: function Big.run is {run.length} lines (limit {MAX_FUNCTION_LINES}). "
        "Fix: extract named steps into helper functions, or add 'm.py:Big.run' to "
        "EXCEPTIONS with a reason"
    )
