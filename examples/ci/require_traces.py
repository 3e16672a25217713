"""Fail when a flow has no trace: `python require_traces.py DIR [DIR ...]`.

A replay skips a flow without a trace (so a shard stays green); this check is the CI job
that turns that skip into a failure, naming the command that records the trace. It starts
no agent and no proxy. Exit 0: every flow has its trace; 1: some do not; 2: bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import flowproof


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: require_traces.py DIR [DIR ...]", file=sys.stderr)
        return 2
    missing: list[Path] = []
    for root in map(Path, argv):
        if not root.is_dir():
            print(f"{root}: not a directory", file=sys.stderr)
            return 2
        missing.extend(flowproof.missing_traces(root))
    for spec in missing:
        print(f"{spec}: no trace; record it: flowproof record {spec}")
    if missing:
        print(f"{len(missing)} flow(s) without a trace", file=sys.stderr)
        return 1
    print("every flow has its trace")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
