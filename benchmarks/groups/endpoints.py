"""Per replayed endpoint turn: an embeddings call, the bare stub against flowproof embedded.

A retrieval agent embeds its question on every run, so an embedding turn's cost matters as
a chat turn's does. The openai SDK asks for one 1536-dimension vector (base64, its
default); the stub answers canned bytes, flowproof replays the recorded turn. One client
process per (server, round), servers visited in ABBA order.
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from pathlib import Path

from benchmarks import harness, payloads
from benchmarks.harness import Row, Server, Settings

WARMUP = 3
NAMES = ("stub", "embedded")
LABELS = {
    "stub": "bare asyncio stub (floor)",
    "embedded": "flowproof replay, embedded ProxyEngine",
}


def run(settings: Settings) -> list[Row]:
    calls = max(5, settings.calls)
    harness.log(f"endpoints: embeddings x{calls} per client, {settings.rounds} rounds")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp, ExitStack() as stack:
        folder = Path(temp)
        asked = 2 * settings.rounds * (calls + WARMUP) + 10
        responses = payloads.embedding_stub(folder / "stub.json")
        trace = payloads.embedding_trace(folder / "one.trace.yaml")
        bench = harness.BENCH / "servers"
        embedded = [harness.PYTHON, str(bench / "embedded.py"), "replay", str(trace)]
        embedded += ["--repeat", str(asked)]
        stub = [harness.PYTHON, str(bench / "stub.py"), str(responses)]
        servers = {
            "stub": stack.enter_context(Server("stub", stub)),
            "embedded": stack.enter_context(Server("embedded", embedded)),
        }
        for name in harness.abba(NAMES, settings.rounds):
            argv = [harness.PYTHON, str(harness.BENCH / "clients" / "embeddings.py")]
            argv += [servers[name].base_url, "--calls", str(calls), "--warmup", str(WARMUP)]
            results.setdefault(name, []).append(float(harness.run_json(argv)["embeddings"]))
    values = {name: harness.median(results[name]) for name in NAMES}
    floor = values["stub"]
    return [
        Row(
            "per-turn",
            f"embeddings (1536 floats, base64): {LABELS[name]}",
            harness.ms(values[name]),
            f"{values[name] / floor:.2f}x"
            + (f" ({(values[name] - floor) * 1000:+.2f} ms)" if name != "stub" else ""),
        )
        for name in NAMES
    ]
