"""Chaos: `flowproof chaos` sweeping a 6-call flow across the 5 default kinds (30 cells) at
`-j 2`, against 30 plain replays of the same flow (`flowproof run DIR -j 2`), in one run.

A cell is a replay with one fault: the target is that a sweep costs what its replays cost
(at most 1.2x), not 30 starts of flowproof. The agent sends a failed call again at once
(BENCH_RETRIES), so every fault is survived and no SDK back-off sleep is measured: what is
left over the plain replays is flowproof's (the sweep's baseline replay, the faults, the
retried request each cell adds). The agent is not streamed: its `cut` cells run and are
n/a.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from benchmarks import flows, harness
from benchmarks.harness import Row, Settings

TURNS = 6
KINDS = 5  # 429, 500, 529, reset, cut: the command's default
CELLS = TURNS * KINDS
NAMES = ("replays", "chaos")


def _retrying(flow: flows.Flow, folder: Path) -> Path:
    """The flow again, its agent retrying a failed call at once; the same trace."""
    folder.mkdir(parents=True, exist_ok=True)
    document = yaml.safe_load(flow.spec_path.read_text())
    document["agent"]["env"]["BENCH_RETRIES"] = "2"
    spec = folder / flow.spec_path.name
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    spec.with_name(flow.trace_path.name).write_text(flow.trace_path.read_text())
    return spec


def measure(spec: Path, replays: Path, rounds: int) -> dict[str, float]:
    argv = {
        "replays": [harness.FLOWPROOF, "run", str(replays), "-j", "2"],
        "chaos": [harness.FLOWPROOF, "chaos", str(spec), "-j", "2", "--fail-on", "crashed,hung"],
    }
    walls: dict[str, list[float]] = {name: [] for name in NAMES}
    for name in harness.abba(NAMES, rounds):
        walls[name].append(harness.timed(argv[name], cwd=spec.parent))
    return {name: harness.median(values) for name, values in walls.items()}


def run(settings: Settings) -> list[Row]:
    rounds = min(settings.rounds, 3)  # a round is ~45 s on 2 cores; a shared machine is noisy
    harness.log(f"chaos: a {TURNS}-call flow, {CELLS} cells vs {CELLS} replays x {rounds}")
    with (
        tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp,
        flows.recorded_flow(Path(temp) / "template", TURNS) as flow,
    ):
        spec = _retrying(flow, Path(temp) / "chaos")
        retrying = flows.Flow(
            spec, spec.with_name(flow.trace_path.name), flow.cassette, flow.stub, TURNS
        )
        replays = retrying.copies(Path(temp) / "replays", CELLS)
        walls = measure(spec, replays, rounds)
    plain, sweep = walls["replays"], walls["chaos"]
    what = f"a {TURNS}-call flow"
    return [
        Row(
            "chaos",
            f"{what}: {CELLS} plain replays, flowproof run DIR -j 2",
            harness.seconds(plain),
            "1.00x",
        ),
        Row(
            "chaos",
            f"{what}: flowproof chaos -j 2, {KINDS} default kinds ({CELLS} cells)",
            harness.seconds(sweep),
            f"{sweep / plain:.2f}x the replays",
            "<= 1.2x the replays",
            harness.verdict(sweep / plain <= 1.2),
        ),
    ]
