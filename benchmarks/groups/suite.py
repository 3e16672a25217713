"""Suite: N copies of the 6-turn flow, `flowproof run DIR -j 1/2/4` vs the agents alone.

"Alone" runs the same N agent processes one after another against the stub, so the
`-j 1` ratio is flowproof's whole per-flow cost on a suite.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks import flows, harness
from benchmarks.harness import Row, Settings

TURNS = 6
NAMES = ("alone", "-j 1", "-j 2", "-j 4")


def _alone(flow: flows.Flow, count: int) -> float:
    return sum(
        harness.timed([harness.PYTHON, str(flows.AGENT)], flow.agent_env()) for _ in range(count)
    )


def measure(flow: flows.Flow, folder: Path, count: int, rounds: int) -> dict[str, float]:
    walls: dict[str, list[float]] = {name: [] for name in NAMES}
    for name in harness.abba(NAMES, rounds):
        if name == "alone":
            walls[name].append(_alone(flow, count))
            continue
        jobs = name.split()[1]
        argv = [harness.FLOWPROOF, "run", str(folder), "-j", jobs]
        walls[name].append(harness.timed(argv, cwd=folder.parent))
    return {name: harness.median(values) for name, values in walls.items()}


def run(settings: Settings) -> list[Row]:
    count = settings.suite_flows
    harness.log(f"suite: {count} flows x {settings.suite_rounds}")
    with (
        tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp,
        flows.recorded_flow(Path(temp) / "template", TURNS) as flow,
    ):
        folder = flow.copies(Path(temp) / "suite", count)
        walls = measure(flow, folder, count, settings.suite_rounds)
    alone, one, two, four = (walls[name] for name in NAMES)
    what = f"{count} {TURNS}-turn flows"
    return [
        Row("suite", f"{what}: agents alone, one after another", harness.seconds(alone), "1.00x"),
        Row(
            "suite",
            f"{what}: flowproof run DIR -j 1",
            harness.seconds(one),
            f"{one / alone:.2f}x alone",
            "<= 1.15x alone",
            harness.verdict(one / alone <= 1.15),
        ),
        Row(
            "suite",
            f"{what}: flowproof run DIR -j 2",
            harness.seconds(two),
            f"{one / two:.2f}x faster than -j 1",
            ">= 1.7x faster than -j 1",
            harness.verdict(one / two >= 1.7),
        ),
        Row(
            "suite",
            f"{what}: flowproof run DIR -j 4",
            harness.seconds(four),
            f"{one / four:.2f}x faster than -j 1",
        ),
    ]
