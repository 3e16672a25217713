"""Agent that takes its working directory from `PWD`, as a shell script or opencode does.

It prints `PWD` and `os.getcwd()`, then sends one Chat Completions request (stdlib only)
whose system message names `PWD`: a `PWD` that is not the folder the agent runs in puts
the caller's folder into the request, and the replay from another folder diverges.
"""

from __future__ import annotations

import json
import os
import urllib.request


def main() -> int:
    pwd = os.environ.get("PWD", "")
    print(f"PWD={pwd} getcwd={os.getcwd()}")
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": f"You work in {pwd}."},
            {"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]},
        ],
    }
    request = urllib.request.Request(
        f"{os.environ['OPENAI_BASE_URL']}/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.load(response)
    print(answer["choices"][0]["message"]["content"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
