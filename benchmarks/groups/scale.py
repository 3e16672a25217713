"""Cassette scale: per-turn latency by trace length, peak RSS, trace load time.

Both traces hold distinct 2 KB turns; every round starts fresh servers (a turn replays
once) and the client asks for every turn in order, so a lookup that grew with the trace,
or with the position in it, would show in the median. Peak RSS is the replay server's
VmHWM after serving every turn of a long 50 KB trace.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks import harness, payloads
from benchmarks.harness import Row, Server, Settings

SHORT = 10


def _replay(trace: Path, turns: int, size: int) -> tuple[float, float]:
    """Median per-turn seconds over every turn of `trace`, and the server's peak RSS (MB)."""
    server = [harness.PYTHON, str(harness.BENCH / "servers" / "embedded.py"), "replay", str(trace)]
    with Server("embedded", server) as proxy:
        argv = [harness.PYTHON, str(harness.BENCH / "clients" / "turns.py"), proxy.base_url]
        argv += ["--variant", f"{size}:json:{turns}", "--warmup", "0", "--distinct"]
        median = float(next(iter(harness.run_json(argv).values())))
        return median, proxy.peak_rss_mb()


def _load_seconds(trace: Path) -> float:
    argv = [harness.PYTHON, str(harness.BENCH / "clients" / "load_trace.py"), str(trace)]
    return float(harness.run_json(argv)["seconds"])


def _latency_rows(settings: Settings, folder: Path) -> list[Row]:
    long = settings.scale_turns
    traces = {
        SHORT: payloads.distinct_trace(folder / "short.trace.yaml", 2_000, SHORT),
        long: payloads.distinct_trace(folder / "long.trace.yaml", 2_000, long),
    }
    medians: dict[int, list[float]] = {SHORT: [], long: []}
    for turns in harness.abba([SHORT, long], settings.rounds):
        medians[turns].append(_replay(traces[turns], turns, 2_000)[0])
    short_ms, long_ms = harness.median(medians[SHORT]), harness.median(medians[long])
    load = _load_seconds(traces[long])
    return [
        Row("scale", f"per turn, {SHORT}-turn trace (2 KB)", harness.ms(short_ms), "1.00x"),
        Row(
            "scale",
            f"per turn, {long}-turn trace (2 KB)",
            harness.ms(long_ms),
            f"{long_ms / short_ms:.2f}x",
            "<= 1.1x the 10-turn trace",
            harness.verdict(long_ms / short_ms <= 1.1),
        ),
        Row("scale", f"trace.load, {long} turns of 2 KB", harness.seconds(load)),
    ]


def _memory_rows(settings: Settings, folder: Path) -> list[Row]:
    turns = settings.rss_turns
    trace = payloads.distinct_trace(folder / "big.trace.yaml", 50_000, turns)
    megabytes = trace.stat().st_size / 2**20
    load = _load_seconds(trace)
    median, peak = _replay(trace, turns, 50_000)
    return [
        Row(
            "scale",
            f"trace.load, {turns} turns of 50 KB ({megabytes:.0f} MB)",
            harness.seconds(load),
        ),
        Row("scale", f"per turn, {turns}-turn trace (50 KB)", harness.ms(median)),
        Row(
            "scale",
            f"peak RSS of the replay server, {turns} turns of 50 KB",
            f"{peak:.0f} MB",
            "",
            "< 300 MB",
            harness.verdict(peak < 300),
        ),
    ]


def run(settings: Settings) -> list[Row]:
    harness.log(f"scale: {settings.scale_turns} / {settings.rss_turns} turns x {settings.rounds}")
    with tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp:
        return _latency_rows(settings, Path(temp)) + _memory_rows(settings, Path(temp))
