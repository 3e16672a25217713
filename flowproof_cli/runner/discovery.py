"""Finding flows below a directory, and the suite each flow belongs to."""

from __future__ import annotations

from pathlib import Path

from flowproof_cli.spec.suite import SUITE_FILE
from flowproof_cli.trace.storage import SPEC_SUFFIX

IGNORED_DIRS = frozenset({".flowproof", ".git", "node_modules", ".venv"})


def discover_specs(root: Path) -> list[Path]:
    """Every *.flow.yaml below root in a stable order, skipping `.flowproof/` and friends."""
    found = [
        path
        for path in root.rglob(f"*{SPEC_SUFFIX}")
        if path.is_file() and not IGNORED_DIRS.intersection(path.relative_to(root).parts[:-1])
    ]
    return sorted(found)


def nearest_suite(spec_path: Path) -> Path | None:
    """The `suite.yaml` closest above spec_path, or None.

    The walk stops at the repository root (a folder holding `.git`, itself still searched)
    or the filesystem root, so a suite never leaks in from outside the project.
    """
    folder = spec_path.resolve().parent
    while True:
        candidate = folder / SUITE_FILE
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists() or folder.parent == folder:
            return None
        folder = folder.parent
