"""A large recorded answer replayed to a streaming client, beside the same answer plain.

One embedded replay server per answer size (a one-turn trace whose answer is 2 MB or
20 MB, repeated in memory); one `openai`-SDK client process per round (`clients/turns.py`),
asking for the answer plain and streamed, in ABBA order across rounds. The stream is the one
flowproof synthesizes from the recorded answer: a streaming client pays per event, so the
row also says how many events it is.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks import harness, payloads
from benchmarks.harness import Row, Server, Settings

SIZES = (("2 MB", 2_000_000), ("20 MB", 20_000_000))
KINDS = ("json", "sse")
WARMUP = 1
TARGET = 2.0  # the streamed answer within 2x of the plain one (issue 22)


def calls_for(settings: Settings, chars: int) -> int:
    """Timed calls of each kind per client process: fewer for the larger answer."""
    base = 2 if settings.quick else 6
    return base if chars < 10_000_000 else max(1, base // 2)


def _events(chars: int) -> int:
    """How many SSE events flowproof synthesizes for the answer."""
    body = payloads.request_body(2_000)
    stream = payloads.sse({**body, "stream": True}, payloads.completion(payloads.long_text(chars)))
    return stream.count("\n\n")


def _measure(settings: Settings, folder: Path, chars: int) -> dict[str, list[float]]:
    """Kind -> one median per round, against one replay server for this size."""
    calls = calls_for(settings, chars)
    trace = payloads.large_answer_trace(folder / f"answer-{chars}.trace.yaml", chars)
    repeat = settings.rounds * len(KINDS) * (calls + WARMUP) + 2
    server = [harness.PYTHON, str(harness.BENCH / "servers" / "embedded.py"), "replay"]
    server += [str(trace), "--repeat", str(repeat)]
    medians: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with Server("embedded", server) as replay:
        for number in range(settings.rounds):
            order = KINDS if number % 2 == 0 else KINDS[::-1]
            argv = [harness.PYTHON, str(harness.BENCH / "clients" / "turns.py"), replay.base_url]
            argv += ["--warmup", str(WARMUP)]
            argv += [a for kind in order for a in ("--variant", f"2000:{kind}:{calls}")]
            for variant, median in harness.run_json(argv).items():
                medians[variant.split(":")[1]].append(float(median))
    return medians


def run(settings: Settings) -> list[Row]:
    harness.log(f"large-answer: 2 MB and 20 MB answers, {settings.rounds} rounds")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp:
        for label, chars in SIZES:
            medians = _measure(settings, Path(temp), chars)
            plain, streamed = (harness.median(medians[kind]) for kind in KINDS)
            ratio = streamed / plain
            rows.append(
                Row("large-answer", f"{label} answer, plain JSON", harness.ms(plain), "1.00x")
            )
            rows.append(
                Row(
                    "large-answer",
                    f"{label} answer, streamed ({_events(chars)} events)",
                    harness.ms(streamed),
                    f"{ratio:.2f}x plain",
                    f"<= {TARGET:.0f}x plain",
                    harness.verdict(ratio <= TARGET),
                )
            )
    return rows
