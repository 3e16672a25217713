"""Pick the `mcp` SDK generation before importing it (the venv has 2.x; 1.x sits in .deps/mcp1).

`use_mcp1()` puts the side-by-side 1.x install (env MCP1_PATH, default <repo>/.deps/mcp1, made
by scripts/bootstrap.sh) first on sys.path; `use_mcp2()` drops any 1.x install from sys.path,
so a 2.x script still works when it inherits PYTHONPATH=.deps/mcp1 from a 1.x parent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def mcp1_dir() -> Path:
    return Path(os.environ.get("MCP1_PATH") or REPO / ".deps" / "mcp1")


def _holds_mcp1(entry: str) -> bool:
    return bool(entry) and any(Path(entry).glob("mcp-1.*.dist-info"))


def use_mcp1() -> None:
    path = mcp1_dir()
    if not any(path.glob("mcp-1.*.dist-info")):
        sys.exit(
            f"{Path(sys.argv[0]).name}: the mcp 1.x SDK is missing at {path}: run scripts/bootstrap.sh"
        )
    sys.path.insert(0, str(path))


def use_mcp2() -> None:
    sys.path[:] = [entry for entry in sys.path if not _holds_mcp1(entry)]
