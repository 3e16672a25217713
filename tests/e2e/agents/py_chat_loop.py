"""Real agent: an openai-python chat loop with history over stdin and stdout.

Each line on stdin is one user message; the agent answers it with the model (the whole
history sent every time), prints the answer, then its prompt `> ` and waits for the next.
It exits at end of input. AGENT_SIGNATURE, when set, is printed after each answer from the
AGENT_SIGNATURE_FROM-th on (default the first): what a code change to the agent's output
would do, while its model calls, whose history holds the model's own answers, stay the same.
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
    signed_from = int(os.environ.get("AGENT_SIGNATURE_FROM", "1"))
    answered = 0
    while True:
        try:
            line = input("> ")
        except EOFError:
            return 0
        history.append({"role": "user", "content": line})
        answer = client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
        text = answer.choices[0].message.content or ""
        history.append({"role": "assistant", "content": text})
        answered += 1
        signed = signature and answered >= signed_from
        print(text + (f" {signature}" if signed else ""), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
