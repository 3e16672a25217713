"""The import graph of flowproof/, flowproof_cli/ and addons/: each layer imports only its own
layer or a lower one, and no module imports itself back through others (no cycle).

Every `import` counts: one inside a function (a lazy import is still a dependency) and one
under `if TYPE_CHECKING:` (a type the module names is a dependency of its design, even if
it never runs; a cycle hidden there is still a cycle). The layers are the ones
docs/architecture.md draws.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

#: Low to high. A module's layer is that of the longest prefix naming it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "flowproof_cli.errors",
        "flowproof_cli.canonical",
        "flowproof_cli.faults.plan",
        "flowproof_cli.keeper",
        "flowproof_cli.mode",
        "flowproof_cli.process",
        "flowproof_cli.quoting",
        "flowproof_cli.routes",
        "flowproof_cli.trajectory",
        "flowproof_cli.verdict",
    ),
    (
        "flowproof_cli.dialects",
        "flowproof_cli.providers",
        "flowproof_cli.match",
        "flowproof_cli.egress",
        "flowproof_cli.faults",
    ),
    ("flowproof_cli.spec", "flowproof_cli.cassette"),
    ("flowproof_cli.mcp",),
    ("flowproof_cli.trace", "flowproof_cli.assertions"),
    ("flowproof_cli.evidence",),
    ("flowproof_addons",),
    ("flowproof_cli.runner",),
    ("flowproof_cli.doctor", "flowproof_cli.inspect"),
    ("flowproof",),
    ("flowproof_cli.cli", "flowproof_cli.pytest_plugin"),
    ("flowproof_cli.__main__",),
)
PACKAGES = {
    "flowproof": REPO / "flowproof",
    "flowproof_cli": REPO / "flowproof_cli",
    "flowproof_addons": REPO / "addons",
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `module` imports anywhere in its file (resolved to known names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in targets if name in known and name != module}


def _layer(module: str) -> int:
    best, level = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), index
    return level


def _graph(modules: dict[str, Path] | None = None) -> dict[str, set[str]]:
    modules = _modules() if modules is None else modules
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} (layer {_layer(source)}) imports {target} (layer {_layer(target)})"
        for source, targets in graph.items()
        for target in targets
        if _layer(target) > _layer(source) >= 0
    )


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that import one another, directly or through others."""
    # A package's __init__ that re-exports its own submodules is not a cycle of the design.
    edges = {
        source: {t for t in targets if not (source.startswith(t + ".") and t in graph)}
        for source, targets in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def connect(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return sorted(cycles)


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(name for name in _modules() if _layer(name) < 0)
    unplaced = [name for name in unplaced if name not in ("flowproof_cli", "flowproof_addons")]
    assert unplaced == [], f"add these modules to LAYERS (and docs/architecture.md): {unplaced}"


def test_no_module_imports_a_higher_layer() -> None:
    upward = _upward(_graph())
    assert upward == [], "upward imports:\n" + "\n".join(upward)


def test_the_import_graph_has_no_cycle() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """Red path for the checker itself: a planted upward import is found, also one under
    `if TYPE_CHECKING:` and one inside a function."""
    target = "flowproof_cli.runner.flow"
    assert _layer(target) > _layer("flowproof_cli.canonical")
    (tmp_path / "flow.py").write_text("")
    for name, text in (
        ("top", "from flowproof_cli.runner import flow\n"),
        ("typing", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import " + target),
        ("lazy", "def f() -> None:\n    from flowproof_cli.runner.flow import run_flow\n"),
    ):
        planted = tmp_path / f"{name}.py"
        planted.write_text(text + "\n")
        graph = _graph({"flowproof_cli.canonical": planted, target: tmp_path / "flow.py"})
        assert _upward(graph) == [
            f"flowproof_cli.canonical (layer 0) imports {target} (layer {_layer(target)})"
        ], name


def test_the_checker_sees_a_cycle_only_under_type_checking(tmp_path: Path) -> None:
    """Red path: two modules of one layer that import each other, one of the two edges
    only for its annotations, are a cycle."""
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from flowproof_cli.spec.b import B\n"
        "def a(b: 'B') -> None: ...\n"
    )
    (tmp_path / "b.py").write_text("from flowproof_cli.spec.a import a\nclass B: ...\n")
    (tmp_path / "c.py").write_text("from flowproof_cli.spec import b\n")
    modules = {f"flowproof_cli.spec.{name}": tmp_path / f"{name}.py" for name in "abc"}
    graph = _graph(modules)
    assert graph["flowproof_cli.spec.a"] == {"flowproof_cli.spec.b"}
    assert _upward(graph) == []
    assert _cycles(graph) == [["flowproof_cli.spec.a", "flowproof_cli.spec.b"]]
