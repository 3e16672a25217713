"""The boto3 client of the Bedrock per-turn benchmark, in its own process.

    python benchmarks/clients/bedrock_turns.py BASE_URL --calls 200 --warmup 3

Sends the same Converse request through `converse_stream` CALLS times after `--warmup`
untimed ones, one at a time on one keep-alive connection, each timed to the stream's last
event (every event read: botocore checks each frame's CRCs). Last stdout line: JSON, the
median seconds.
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

import boto3
import botocore.config

from benchmarks.bedrock_payloads import MODEL, converse_request


def measure(client: Any, calls: int, warmup: int) -> float:
    samples = []
    for number in range(warmup + calls):
        started = time.perf_counter()
        for _event in client.converse_stream(modelId=MODEL, **converse_request())["stream"]:
            pass
        if number >= warmup:
            samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=args.base_url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench-secret",  # noqa: S106 (a placeholder)
        config=botocore.config.Config(retries={"max_attempts": 1}),
    )
    print(json.dumps({"converse-stream": measure(client, args.calls, args.warmup)}))


if __name__ == "__main__":
    main()
