"""flowproof's benchmarks: every group side by side in one run, one ratio table.

    make bench                                     # everything
    .venv/bin/python benchmarks/run.py --only per-turn --only scale
    FLOWPROOF_BENCH_QUICK=1 .venv/bin/python benchmarks/run.py   # a smoke run, few rounds

Each server and each client is its own process; rounds alternate (ABBA); figures are
medians. Each row prints the issue's target beside the measured ratio and says whether it
is met. Nothing is asserted: these are measurements, not tests (docs/performance.md).
Knobs: FLOWPROOF_BENCH_ROUNDS, _CALLS, _FLOW_ROUNDS, _SUITE_FLOWS, _SUITE_ROUNDS,
_SCALE_TURNS, _RSS_TURNS (see benchmarks/harness.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness
from benchmarks.groups import (
    bedrock_turn,
    chaos,
    cold_start,
    containment,
    conversation,
    endpoints,
    large_answer,
    per_flow,
    per_turn,
    record,
    scale,
    suite,
)

GROUPS: dict[str, Callable[[harness.Settings], list[harness.Row]]] = {
    "per-turn": per_turn.run,
    "bedrock-turn": bedrock_turn.run,
    "per-flow": per_flow.run,
    "suite": suite.run,
    "scale": scale.run,
    "record": record.run,
    "containment": containment.run,
    "cold-start": cold_start.run,
    "large-answer": large_answer.run,
    "endpoints": endpoints.run,
    "conversation": conversation.run,
    "chaos": chaos.run,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", choices=list(GROUPS), help="repeatable")
    args = parser.parse_args()
    settings = harness.Settings.from_environment()
    chosen = args.only or list(GROUPS)
    rows: list[harness.Row] = []
    started = time.perf_counter()
    for name in chosen:
        group_started = time.perf_counter()
        try:
            rows.extend(GROUPS[name](settings))
        except Exception as exc:  # one broken group must not hide the others' figures
            harness.log(f"{name} failed: {exc}")
            rows.append(harness.Row(name, "(group failed, see stderr)", "-"))
        harness.log(f"{name} took {time.perf_counter() - group_started:.1f} s")
    mode = "quick" if settings.quick else "full"
    print(f"\nflowproof benchmarks ({mode}: {settings}); {time.perf_counter() - started:.0f} s\n")
    harness.print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
