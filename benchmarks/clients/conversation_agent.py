"""The conversation benchmark's agent: an openai-SDK chat loop that keeps its history.

With FLOWPROOF_PROMPT set it answers that one task and exits (a one-turn flow); otherwise it
reads one message per stdin line, answers, and prints `> ` when ready for the next, until
end of input. Each turn's seconds (the model call, its request growing with the history)
are appended to the file BENCH_TURN_TIMES names, one number per line.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from openai import OpenAI

SYSTEM = "You are a patient support assistant. " * 20


def answer(client: OpenAI, history: list[Any], message: str) -> str:
    started = time.perf_counter()
    history.append({"role": "user", "content": message})
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=history)
    text = reply.choices[0].message.content or ""
    history.append({"role": "assistant", "content": text})
    with open(os.environ["BENCH_TURN_TIMES"], "a", encoding="utf-8") as times:
        times.write(f"{time.perf_counter() - started}\n")
    return text


def main() -> int:
    client = OpenAI(max_retries=0)
    history: list[Any] = [{"role": "system", "content": SYSTEM}]
    task = os.environ.get("FLOWPROOF_PROMPT")
    if task:
        print(answer(client, history, task))
        return 0
    for line in sys.stdin:
        print(answer(client, history, line.rstrip("\n")))
        print("> ", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
