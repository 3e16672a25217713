"""The openai SDK client of the per-turn benchmarks, in its own process.

    python benchmarks/clients/turns.py BASE_URL --variant 2000:json:200 --variant 50000:sse:50
    python benchmarks/clients/turns.py BASE_URL --variant 2000:json:2000 --distinct --warmup 0

Each `--variant SIZE:json|sse:CALLS` sends the same chat request of about SIZE bytes
(`--distinct`: call i carries marker i, matching a trace of distinct turns) CALLS times
after `--warmup` untimed ones, one at a time on one keep-alive connection, timing each
call to its last byte (streams are read to the end). Last stdout line: JSON, the median
seconds per variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from openai import OpenAI

from benchmarks.payloads import request_body


def call(client: OpenAI, body: dict[str, Any], stream: bool) -> None:
    if not stream:
        client.chat.completions.create(**body)
        return
    for _chunk in client.chat.completions.create(**body, stream=True):
        pass


def measure(client: OpenAI, variant: str, warmup: int, distinct: bool) -> float:
    size, kind, count = variant.split(":")
    total = warmup + int(count)
    bodies = (
        [request_body(int(size), i) for i in range(total)]
        if distinct
        else [request_body(int(size))] * total
    )
    samples = []
    for number, body in enumerate(bodies):
        started = time.perf_counter()
        call(client, body, kind == "sse")
        if number >= warmup:
            samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("--variant", action="append", required=True)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--distinct", action="store_true")
    args = parser.parse_args()
    client = OpenAI(base_url=args.base_url, api_key="sk-bench", max_retries=0)
    medians = {v: measure(client, v, args.warmup, args.distinct) for v in args.variant}
    print(json.dumps(medians))


if __name__ == "__main__":
    main()
