"""Finding flows below a directory, the suite each flow belongs to, and a run's shard."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from flowproof_cli.spec.suite import SUITE_FILE
from flowproof_cli.trace.storage import SPEC_SUFFIX

IGNORED_DIRS = frozenset({".flowproof", ".git", "node_modules", ".venv"})


def discover_specs(root: Path) -> list[Path]:
    """Every *.flow.yaml below root in a stable order, skipping `.flowproof/` and friends.

    Anything so named but a folder counts: a FIFO, a device or a broken link is that flow's
    error (its load says what it is), never silently left out of the run."""
    found = [
        path
        for path in root.rglob(f"*{SPEC_SUFFIX}")
        if not path.is_dir() and not IGNORED_DIRS.intersection(path.relative_to(root).parts[:-1])
    ]
    return sorted(found)


def discover_suites(root: Path) -> list[Path]:
    """Every `suite.yaml` below root, skipping what `discover_specs` skips (`flowproof
    check DIR` validates a suite even when no flow lies below it yet)."""
    found = [
        path
        for path in root.rglob(SUITE_FILE)
        if not path.is_dir() and not IGNORED_DIRS.intersection(path.relative_to(root).parts[:-1])
    ]
    return sorted(found)


def nearest_suite(spec_path: Path) -> Path | None:
    """The `suite.yaml` closest above spec_path, or None.

    The walk stops at the repository root (a folder holding `.git`, itself still searched)
    or the filesystem root, so a suite never leaks in from outside the project.

    Anything so named but a folder is the suite, as `discover_specs` counts a spec: a FIFO,
    a device or a bad link is refused when it loads, saying what it is, never passed over
    (the flows would run without its env, hooks and match rules, and could pass).
    """
    folder = Path(os.path.realpath(spec_path)).parent  # never raises, even on a link loop
    while True:
        candidate = folder / SUITE_FILE
        if os.path.lexists(candidate) and not candidate.is_dir():
            return candidate
        if (folder / ".git").exists() or folder.parent == folder:
            return None
        folder = folder.parent


SHARD_FORMAT = (
    "expected K/N, two whole numbers with 1 <= K <= N (e.g. `--shard 2/4` runs the second "
    "of four shards)"
)


@dataclass(frozen=True)
class Shard:
    """Shard K of N: the flows whose position in the sorted list of paths is K-1 modulo N.

    Index modulo N over sorted paths, not a hash: every machine that sees the same files
    makes the same split, each flow lands in exactly one shard, and shard sizes differ by
    at most one (a hash of each path would keep a flow in its shard when others are added,
    but can leave one shard empty and another doubled on a small suite).
    """

    index: int  # K, 1-based
    total: int  # N

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"

    def select(self, paths: Sequence[Path], root: Path) -> list[Path]:
        """This shard's paths, in their given order; sorted by their POSIX form relative to
        root, so the split does not depend on where the checkout lies."""
        ordered = sorted(paths, key=lambda path: _relative_key(path, root))
        mine = {
            path for position, path in enumerate(ordered) if position % self.total == self.index - 1
        }
        return [path for path in paths if path in mine]


def parse_shard(text: str) -> Shard:
    """`K/N` as a Shard; ValueError naming the expected form otherwise."""
    index, slash, total = text.strip().partition("/")
    if slash and index.isdecimal() and total.isdecimal() and 1 <= int(index) <= int(total):
        return Shard(int(index), int(total))
    raise ValueError(f"{text!r}: {SHARD_FORMAT}")


def _relative_key(path: Path, root: Path) -> str:
    real = Path(os.path.realpath(path))  # no error on a link loop, which a flow may be
    try:
        return real.relative_to(os.path.realpath(root)).as_posix()
    except ValueError:
        return real.as_posix()
