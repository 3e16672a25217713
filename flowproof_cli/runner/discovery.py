"""Finding flows below a directory."""

from __future__ import annotations

from pathlib import Path

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
