"""An agent that fires CALLS model calls at once (asyncio and the openai SDK), each asking
about a place of its own, then one more call that reports how many came back with their own
answer.

Every call's prompt names `Place<N>`, and the fake upstream echoes the prompt, so an answer
given to the wrong call (a crossed or a duplicated turn) is seen here. The last call's prompt
holds the count (`64 of 64 answered with their own turn`): at replay any other count is a
request the recording never saw, so flowproof fails the flow with a divergence. The agent
also exits 1 when a call went unanswered or crossed, naming them.
"""

from __future__ import annotations

import asyncio
import os
import sys

from openai import AsyncOpenAI

CALLS = int(os.environ.get("AGENT_CALLS", "64"))
SYSTEM = "You answer in one sentence."


def prompt(number: int) -> str:
    return f"Call {number}: how is the weather in Place{number:02d}?"


async def ask(client: AsyncOpenAI, number: int) -> str:
    response = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": prompt(number)},
        ],
    )
    return response.choices[0].message.content or ""


async def main() -> int:
    client = AsyncOpenAI(max_retries=0, timeout=120)
    answers = await asyncio.gather(
        *(ask(client, number) for number in range(CALLS)), return_exceptions=True
    )
    wrong = [
        number
        for number, answer in enumerate(answers)
        if isinstance(answer, BaseException) or prompt(number) not in answer
    ]
    own = CALLS - len(wrong)
    summary = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Report: {own} of {CALLS} answered with their own turn"},
        ],
    )
    print(summary.choices[0].message.content)
    if wrong:
        print(f"not answered with their own turn: {wrong}: {answers[wrong[0]]!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
