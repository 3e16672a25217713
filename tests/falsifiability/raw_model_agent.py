"""An agent that makes one raw model call and writes down exactly what it was answered.

No SDK: an SDK would retry, time out or reword what the proxy answered. The agent posts one
Chat Completions request to `$OPENAI_BASE_URL/chat/completions` and writes the status, the
headers and the body it got (or the transport error) as JSON to `$AGENT_SEEN`. It exits 0
whatever happened, so a failed record is flowproof's own verdict, never the agent's crash.
`$AGENT_BODY`, when set, is posted as it is instead (a malformed request).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any


def call() -> dict[str, Any]:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": os.environ.get("FLOWPROOF_PROMPT", "hi")}],
    }
    raw_body = os.environ.get("AGENT_BODY") or json.dumps(body)
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=raw_body.encode(),
        headers={"content-type": "application/json", "authorization": "Bearer placeholder"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            status, headers, raw = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        status, headers, raw = exc.code, dict(exc.headers), exc.read()
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    lowered = {name.lower(): value for name, value in headers.items()}
    return {"status": status, "headers": lowered, "body": raw.decode("utf-8", "replace")}


def main() -> int:
    seen = call()
    with open(os.environ["AGENT_SEEN"], "w", encoding="utf-8") as out:
        json.dump(seen, out)
    print(f"agent: got {seen.get('status', seen.get('error'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
