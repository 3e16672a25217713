"""Real agent: an openai-python chat loop with history over stdin and stdout.

Each line on stdin is one user message; the agent answers it with the model (the whole
history sent every time), prints the answer, then its prompt `> ` and waits for the next.
It exits at end of input. AGENT_SIGNATURE, when set, is printed after each answer (what a
code change to the agent's output would do).
"""

from __future__ import annotations

import os

from openai import OpenAI

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")
SYSTEM = "You are the support bot of a small shop."


def main() -> int:
    client = OpenAI(max_retries=0)
    history: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
    signature = os.environ.get("AGENT_SIGNATURE", "")
    while True:
        try:
            line = input("> ")
        except EOFError:
            return 0
        history.append({"role": "user", "content": line})
        answer = client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
        text = answer.choices[0].message.content or ""
        history.append({"role": "assistant", "content": text})
        print(text + (f" {signature}" if signature else ""), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
