"""Agent that retries a refused model call forever, as some agents do with a 409 (one
retried it about nine times, 70 s per failing run), ignoring `x-should-retry: false`.

Stdlib only: one Chat Completions request (the model from AGENT_MODEL), retried every
AGENT_RETRY_WAIT seconds (default 0.2; a back-off far past any timeout makes it hang on the
first error) while the answer is an HTTP error, each attempt printed. It also ignores SIGTERM
after AGENT_IGNORE_TERM is set, so that only the stop's SIGKILL ends it.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request


def main() -> int:
    if os.environ.get("AGENT_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    body = {
        "model": os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
        "messages": [{"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]}],
    }
    request = urllib.request.Request(
        f"{os.environ['OPENAI_BASE_URL']}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "authorization": "Bearer placeholder"},
    )
    wait = float(os.environ.get("AGENT_RETRY_WAIT", "0.2"))
    attempt = 0
    while True:
        attempt += 1
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as exc:
            print(f"attempt {attempt}: HTTP {exc.code}, retrying", flush=True)
            time.sleep(wait)
            continue
        print(answer["choices"][0]["message"]["content"], flush=True)
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
