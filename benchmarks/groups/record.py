"""Record: per-turn cost of record mode (forwarding to the stub) vs the stub directly."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks import harness, payloads
from benchmarks.harness import Row, Server, Settings

NAMES = ("stub", "record")


def run(settings: Settings) -> list[Row]:
    harness.log(f"record: {settings.calls} calls x {settings.rounds}")
    medians: dict[str, list[float]] = {name: [] for name in NAMES}
    with tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp:
        responses = payloads.stub_responses(Path(temp) / "stub.json", [payloads.completion()])
        servers = harness.BENCH / "servers"
        with Server("stub", [harness.PYTHON, str(servers / "stub.py"), str(responses)]) as stub:
            embedded = [harness.PYTHON, str(servers / "embedded.py"), "record", stub.base_url]
            with Server("record", embedded) as recorder:
                urls = {"stub": stub.base_url, "record": recorder.base_url}
                for name in harness.abba(NAMES, settings.rounds):
                    argv = [harness.PYTHON, str(harness.BENCH / "clients" / "turns.py"), urls[name]]
                    argv += ["--variant", f"2000:json:{settings.calls}"]
                    medians[name].append(next(iter(harness.run_json(argv).values())))
    stub_ms, record_ms = (harness.median(medians[name]) for name in NAMES)
    return [
        Row("record", "2 KB JSON: bare stub directly", harness.ms(stub_ms), "1.00x"),
        Row(
            "record",
            "2 KB JSON: embedded record proxy -> stub",
            harness.ms(record_ms),
            f"{record_ms / stub_ms:.2f}x ({(record_ms - stub_ms) * 1000:+.2f} ms)",
        ),
    ]
