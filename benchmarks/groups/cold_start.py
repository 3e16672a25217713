"""Cold start: `flowproof --help`, and `flowproof run`'s fixed cost on a one-call flow.

The fixed cost is the CLI's wall time minus the same agent's wall time alone against the
stub (medians of alternating rounds): proxy start, spec and trace load, judging, output.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks import flows, harness
from benchmarks.harness import Row, Settings

NAMES = ("python", "help", "alone", "run")


def run(settings: Settings) -> list[Row]:
    harness.log(f"cold-start x {settings.flow_rounds}")
    walls: dict[str, list[float]] = {name: [] for name in NAMES}
    with (
        tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp,
        flows.recorded_flow(Path(temp), 1) as flow,
    ):
        commands = {
            "python": ([harness.PYTHON, "-c", "pass"], {}),
            "help": ([harness.FLOWPROOF, "--help"], {}),
            "alone": ([harness.PYTHON, str(flows.AGENT)], flow.agent_env()),
            "run": ([harness.FLOWPROOF, "run", str(flow.spec_path)], {}),
        }
        for name in harness.abba(NAMES, settings.flow_rounds):
            argv, env = commands[name]
            walls[name].append(harness.timed(argv, env, cwd=Path(temp)))
    python, help_, alone, run_ = (harness.median(walls[name]) for name in NAMES)
    fixed = run_ - alone
    return [
        Row("cold-start", "python -c pass (interpreter floor)", harness.seconds(python)),
        Row(
            "cold-start",
            "flowproof --help",
            harness.seconds(help_),
            f"{help_ / python:.1f}x bare python",
            "< 0.15 s",
            harness.verdict(help_ < 0.15),
        ),
        Row("cold-start", "one-call agent alone against the stub", harness.seconds(alone)),
        Row(
            "cold-start",
            "flowproof run, one-call flow: fixed cost beyond the agent",
            f"{fixed:.3f} s",
            f"{run_:.3f} s vs {alone:.3f} s",
            "< 0.25 s",
            harness.verdict(fixed < 0.25),
        ),
    ]
