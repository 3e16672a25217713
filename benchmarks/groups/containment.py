"""Containment: benchmarks/egress.py (contained vs uncontained) in a fresh network namespace.

It needs root and unshare; where they are missing the row says so instead of a figure.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from benchmarks import harness
from benchmarks.harness import Row, Settings


def _egress(summary: Path) -> str | None:
    """Run egress.py in `unshare -n` with loopback up; the failure, if any."""
    if shutil.which("unshare") is None:
        return "unshare not found"
    inner = f"ip link set lo up && {shlex.quote(harness.PYTHON)} benchmarks/egress.py"
    inner += f" --summary {shlex.quote(str(summary))}"
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", inner],
        capture_output=True,
        text=True,
        cwd=harness.REPO,
        env=harness.process_env(),
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        return (
            (done.stderr or done.stdout).strip().splitlines()[-1:][0]
            if (done.stderr or done.stdout)
            else f"exit {done.returncode}"
        )
    return None


def run(settings: Settings) -> list[Row]:
    harness.log("containment: benchmarks/egress.py in a fresh network namespace")
    with tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp:
        summary = Path(temp) / "egress.json"
        failure = _egress(summary)
        if failure is not None:
            return [Row("containment", f"not measured: {failure}", "-")]
        figures = json.loads(summary.read_text())
    connects, flow = figures["loopback_connects"], figures["replayed_flow"]
    open_us, held_us = connects["uncontained"]["median_us"], connects["contained"]["median_us"]
    open_ms, held_ms = flow["uncontained"]["flow_ms"], flow["contained"]["flow_ms"]
    open_wall, held_wall = flow["uncontained"]["wall_ms"], flow["contained"]["wall_ms"]
    return [
        Row("containment", "loopback connect, uncontained", f"{open_us:.1f} us", "1.00x"),
        Row(
            "containment",
            "loopback connect, contained",
            f"{held_us:.1f} us",
            f"{held_us / open_us:.2f}x",
        ),
        Row("containment", "replayed 2-call flow, uncontained", f"{open_ms:.0f} ms", "1.00x"),
        Row(
            "containment",
            "replayed 2-call flow, contained",
            f"{held_ms:.0f} ms",
            f"{held_ms / open_ms:.3f}x",
            "within 5 %",
            harness.verdict(held_ms / open_ms <= 1.05),
        ),
        Row(
            "containment",
            "replayed 2-call flow, CLI wall contained vs uncontained",
            f"{held_wall:.0f} ms",
            f"{held_wall / open_wall:.3f}x",
        ),
    ]
