"""Real agent issuing three chat calls at once (openai SDK, threads), then one that uses them.

AGENT_ORDER=reverse starts the three calls in the opposite order, staggered, so the proxy
sees them arrive in a different order than when they were recorded.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from openai import OpenAI

CITIES = ["Nairobi", "Paris", "Lima"]


def ask(client: OpenAI, city: str, delay: float) -> str:
    time.sleep(delay)
    response = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": "You answer in one sentence."},
            {"role": "user", "content": f"How is the weather in {city}?"},
        ],
    )
    return response.choices[0].message.content or ""


def main() -> int:
    client = OpenAI(max_retries=0)
    order = list(reversed(CITIES)) if os.environ.get("AGENT_ORDER") == "reverse" else CITIES
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {city: pool.submit(ask, client, city, 0.05 * i) for i, city in enumerate(order)}
        answers = [futures[city].result() for city in CITIES]
    summary = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": "You answer in one sentence."},
            {"role": "user", "content": "Summarise: " + " | ".join(answers)},
        ],
    )
    print(summary.choices[0].message.content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
