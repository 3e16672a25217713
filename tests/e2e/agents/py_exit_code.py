"""Real agent (stdlib only): asks the model AGENT_CALLS times (each a new question), prints
a banner, AGENT_NOISE log lines and the model's last answer to stdout and a complaint to stderr, then exits with
AGENT_EXIT. What `assert: output`, `exit code` and `model calls` judge, end to end.

Reads OPENAI_BASE_URL / OPENAI_API_KEY and the task from FLOWPROOF_PROMPT.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def ask(question: str) -> str:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}]}
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'none')}",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.load(response)
    return str(answer["choices"][0]["message"]["content"])


def main() -> int:
    print("agent: starting", flush=True)
    for line in range(int(os.environ.get("AGENT_NOISE", "0"))):  # a log longer than any tail
        print(f"agent: working on step {line} of the booking")
    said = ""
    for number in range(1, int(os.environ.get("AGENT_CALLS", "1")) + 1):
        said = ask(f"{os.environ['FLOWPROOF_PROMPT']} (question {number})")
    print(said)
    print("agent: the booking service is down, try again later", file=sys.stderr)
    return int(os.environ.get("AGENT_EXIT", "0"))


if __name__ == "__main__":
    sys.exit(main())
