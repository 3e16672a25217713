"""Egress containment overhead, contained vs uncontained, side by side (never asserted).

    .venv/bin/python benchmarks/egress.py            # run as root inside `unshare -n` if you can
    .venv/bin/python benchmarks/egress.py --summary OUT.json   # also write the medians

`benchmarks/run.py --only containment` runs it in a fresh network namespace and puts its
figures in the one table. FLOWPROOF_BENCH_QUICK=1 runs fewer rounds.

loopback_connects: one agent process makes 1,000 TCP connects to a loopback listener and
times each (so interpreter start-up is not in the per-connect figure); run plainly and under
the seccomp supervisor, alternating rounds, medians reported with their ratio. The whole
process's wall time (start-up, the stub's handshake) is reported beside it.

replayed_flow: the e2e weather flow (tests/e2e/agents/tool_loop_agent.py, two model calls)
is recorded once against the fake model, then replayed through the real CLI, alternating a
spec without egress keys (uncontained) and the same spec with `allow_egress: []`
(contained). The flow's own duration (from --json) and the CLI's wall time are reported.
Target from the issue: the replayed flow within 5 percent.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from flowproof_cli.egress import Policy, unavailable_reason  # noqa: E402
from tests.conftest import run_cli  # noqa: E402
from tests.e2e.flows import write_flow  # noqa: E402
from tests.egress.contained import run_contained  # noqa: E402
from tests.fakes.fake_upstream import FakeUpstream  # noqa: E402

QUICK = os.environ.get("FLOWPROOF_BENCH_QUICK", "") not in ("", "0")
CONNECTS = 1000
ROUNDS = 2 if QUICK else 5
FLOW_ROUNDS = 2 if QUICK else 10
# Outside the working tree: nothing a run leaves half-written may end up in a commit.
SCRATCH = Path(tempfile.mkdtemp(prefix="flowproof-bench-egress-"))
SUMMARY: dict[str, dict[str, dict[str, float]]] = {}  # benchmark -> mode -> figure -> median

AGENT = """
import json, socket, sys, time
port = int(sys.argv[1]); samples = []
for _ in range({connects}):
    s = socket.socket()
    t = time.perf_counter(); s.connect(("127.0.0.1", port)); samples.append(time.perf_counter() - t)
    s.close()
samples.sort()
print(json.dumps({{"median_us": samples[len(samples) // 2] * 1e6,
                  "mean_us": sum(samples) / len(samples) * 1e6}}))
"""


Figures = dict[str, dict[str, list[float]]]  # mode -> figure -> one value per round


def _abba(modes: list[str], rounds: int) -> Iterator[str]:
    """The modes in order on even rounds, reversed on odd ones (ABBA), so drift cancels."""
    for round_number in range(rounds):
        yield from modes if round_number % 2 == 0 else modes[::-1]


def _summary(
    benchmark: str, results: Figures
) -> Iterator[tuple[str, dict[str, float], dict[str, float]]]:
    """Per mode: the median of each figure, and its ratio to the uncontained median."""
    base = {key: statistics.median(values) for key, values in results["uncontained"].items()}
    for mode, figures in results.items():
        row = {key: statistics.median(values) for key, values in figures.items()}
        SUMMARY.setdefault(benchmark, {})[mode] = row
        yield mode, row, {key: row[key] / base[key] for key in row}


def listener() -> int:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4096)

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    return int(server.getsockname()[1])


def loopback_connects() -> None:
    port = listener()
    argv = [sys.executable, "-S", "-c", AGENT.format(connects=CONNECTS), str(port)]
    results: Figures = {
        "uncontained": {"median_us": [], "mean_us": [], "wall_ms": []},
        "contained": {"median_us": [], "mean_us": [], "wall_ms": []},
    }
    out = SCRATCH / "connects.out"
    for mode in _abba(list(results), ROUNDS):
        with open(out, "w") as handle:
            started = time.perf_counter()
            if mode == "contained":
                run = run_contained(argv, Policy(), stdout=handle.fileno())
                assert run.report.containment.enforced, run.report.containment.line
            else:
                subprocess.run(argv, stdout=handle, check=True)
            wall = (time.perf_counter() - started) * 1000
        figures = json.loads(out.read_text())
        results[mode]["median_us"].append(figures["median_us"])
        results[mode]["mean_us"].append(figures["mean_us"])
        results[mode]["wall_ms"].append(wall)
    out.unlink()
    print(f"loopback_connects: {CONNECTS} connects per process x {ROUNDS} alternating rounds")
    for mode, row, ratio in _summary("loopback_connects", results):
        print(
            f"  {mode:12s} connect p50 {row['median_us']:7.1f} us (x{ratio['median_us']:5.2f})"
            f"   mean {row['mean_us']:7.1f} us (x{ratio['mean_us']:5.2f})"
            f"   process wall {row['wall_ms']:7.1f} ms (x{ratio['wall_ms']:4.2f})"
        )


def replayed_flow() -> None:
    folder = SCRATCH / "flows"
    folder.mkdir(exist_ok=True)
    plain = write_flow(folder, name="plain")
    with FakeUpstream() as fake:
        env = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "sk-x"}
        recorded = run_cli("record", plain, env=env)
        if recorded.code != 0:
            raise SystemExit(f"record failed:\n{recorded.output}")
    contained = folder / "contained.flow.yaml"
    spec = yaml.safe_load(plain.read_text())
    spec["agent"]["allow_egress"] = []
    contained.write_text(yaml.safe_dump(spec, sort_keys=False))
    (folder / "contained.trace.yaml").write_text((folder / "plain.trace.yaml").read_text())
    rows: Figures = {
        "uncontained": {"flow_ms": [], "wall_ms": []},
        "contained": {"flow_ms": [], "wall_ms": []},
    }
    tiers: dict[str, str] = {}
    paths = {"uncontained": plain, "contained": contained}
    for mode in _abba(list(paths), FLOW_ROUNDS):
        started = time.perf_counter()
        result = run_cli("run", paths[mode], "--json")
        wall = (time.perf_counter() - started) * 1000
        if result.code != 0:
            raise SystemExit(f"replay failed:\n{result.output}")
        flow = json.loads(result.stdout)["flows"][0]
        rows[mode]["flow_ms"].append(flow["duration_s"] * 1000)
        rows[mode]["wall_ms"].append(wall)
        tiers[mode] = str(flow.get("containment") or "").strip() or "(not reported)"
    print(
        f"replayed_flow: tool-loop weather flow, 2 model calls, x {FLOW_ROUNDS} alternating rounds"
    )
    for mode, row, ratio in _summary("replayed_flow", rows):
        print(
            f"  {mode:12s} flow p50 {row['flow_ms']:7.1f} ms (x{ratio['flow_ms']:5.3f})"
            f"   CLI wall {row['wall_ms']:7.1f} ms (x{ratio['wall_ms']:5.3f})"
            f"   tier: {tiers[mode]}"
        )


def main() -> None:
    reason = unavailable_reason()
    if reason is not None:
        raise SystemExit(f"cannot measure: {reason}")
    try:
        loopback_connects()
        if "--connects-only" not in sys.argv:
            replayed_flow()
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
    if "--summary" in sys.argv:
        Path(sys.argv[sys.argv.index("--summary") + 1]).write_text(json.dumps(SUMMARY))


if __name__ == "__main__":
    main()
