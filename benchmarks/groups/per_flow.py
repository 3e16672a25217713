"""Per flow: a 6-turn agent under `flowproof run`, alone against the stub, under vcrpy.

Each contender is one whole process run, timed from spawn to exit: flowproof's CLI (proxy,
agent, judge), the agent's own interpreter against the already running stub, and the
agent with vcrpy answering in-process from its cassette.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks import flows, harness
from benchmarks.harness import Row, Settings

TURNS = 6
NAMES = ("alone", "flowproof", "vcrpy")
LABELS = {
    "alone": "agent alone against the stub",
    "flowproof": "flowproof run (replay)",
    "vcrpy": "vcrpy replaying in-process",
}


def measure(flow: flows.Flow, rounds: int) -> dict[str, float]:
    commands = {
        "alone": ([harness.PYTHON, str(flows.AGENT)], flow.agent_env()),
        "flowproof": ([harness.FLOWPROOF, "run", str(flow.spec_path)], {}),
        "vcrpy": ([harness.PYTHON, str(flows.VCR_AGENT), str(flow.cassette)], flow.agent_env()),
    }
    walls: dict[str, list[float]] = {name: [] for name in NAMES}
    for name in harness.abba(NAMES, rounds):
        argv, env = commands[name]
        walls[name].append(harness.timed(argv, env, cwd=flow.spec_path.parent))
    return {name: harness.median(values) for name, values in walls.items()}


def run(settings: Settings) -> list[Row]:
    harness.log(f"per-flow: {TURNS}-turn flow x {settings.flow_rounds}")
    with (
        tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp,
        flows.recorded_flow(Path(temp), TURNS) as flow,
    ):
        walls = measure(flow, settings.flow_rounds)
    base = walls["alone"]
    return [
        Row(
            "per-flow",
            f"{TURNS}-turn flow: {LABELS[name]}",
            harness.seconds(value),
            f"{value / base:.2f}x ({value - base:+.3f} s)" if name != "alone" else "1.00x",
        )
        for name, value in walls.items()
    ]
