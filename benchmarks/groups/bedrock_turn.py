"""Per replayed Bedrock ConverseStream turn (boto3, AWS event-stream frames): the bare stub
serving the same bytes, and flowproof's embedded replay, side by side as the chat rows are.

One client process per server and round, servers visited in ABBA order; the replay's trace
holds the turn as many times as it will be asked.
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from pathlib import Path

from benchmarks import bedrock_payloads, harness
from benchmarks.harness import Row, Server, Settings

WARMUP = 3
NAMES = ("stub", "embedded")
LABELS = {
    "stub": "bare asyncio stub, same bytes (floor)",
    "embedded": "flowproof replay, embedded ProxyEngine",
}


def run(settings: Settings) -> list[Row]:
    calls = max(5, settings.calls)
    harness.log(f"bedrock-turn: {calls} ConverseStream calls per client, {settings.rounds} rounds")
    results: dict[str, list[float]] = {name: [] for name in NAMES}
    with tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp, ExitStack() as stack:
        folder = Path(temp)
        body = folder / "stream.bin"
        body.write_bytes(bedrock_payloads.stream_bytes())
        trace = bedrock_payloads.trace(
            folder / "bedrock.trace.yaml", 2 * settings.rounds * (calls + WARMUP) + 10
        )
        bench = harness.BENCH / "servers"
        stub = [harness.PYTHON, str(bench / "bytes_stub.py"), str(body)]
        stub.append("application/vnd.amazon.eventstream")
        embedded = [harness.PYTHON, str(bench / "embedded.py"), "replay", str(trace)]
        servers = {
            "stub": stack.enter_context(Server("stub", stub)),
            "embedded": stack.enter_context(Server("embedded", embedded)),
        }
        for name in harness.abba(NAMES, settings.rounds):
            argv = [harness.PYTHON, str(harness.BENCH / "clients" / "bedrock_turns.py")]
            argv += [servers[name].base_url, "--calls", str(calls), "--warmup", str(WARMUP)]
            results[name].append(float(harness.run_json(argv)["converse-stream"]))
    floor = harness.median(results["stub"])
    rows = []
    for name in NAMES:
        value = harness.median(results[name])
        extra = f" ({(value - floor) * 1000:+.2f} ms)" if name != "stub" else ""
        rows.append(
            Row(
                "per-turn",
                f"2 KB Bedrock ConverseStream (boto3): {LABELS[name]}",
                harness.ms(value),
                f"{value / floor:.2f}x{extra}",
            )
        )
    return rows
