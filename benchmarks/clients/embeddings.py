"""The openai SDK client of the endpoint benchmark, in its own process.

    python benchmarks/clients/embeddings.py BASE_URL --calls 200 --warmup 3

Embeds the same question CALLS times after `--warmup` untimed calls (the SDK's default
base64 encoding, decoded as it decodes it), one at a time on one keep-alive connection.
Last stdout line: JSON, the median seconds per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from openai import OpenAI

from benchmarks.payloads import EMBEDDING_REQUEST


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    client = OpenAI(base_url=args.base_url, api_key="sk-bench", max_retries=0)
    samples = []
    for number in range(args.warmup + args.calls):
        started = time.perf_counter()
        client.embeddings.create(**EMBEDDING_REQUEST)
        if number >= args.warmup:
            samples.append(time.perf_counter() - started)
    print(json.dumps({"embeddings": statistics.median(samples)}))


if __name__ == "__main__":
    main()
