"""An agent that drives one MCP server by hand and writes down what came back.

No SDK: an SDK would hide a garbage line, retry, or wait for ever. Over stdio it launches
the command in `$FLOWPROOF_MCP_SERVER_PROBE` (flowproof's stand-in); over HTTP it POSTs to
`$FLOWPROOF_MCP_URL_PROBE`. It sends `initialize`, `notifications/initialized`,
`tools/list` and `tools/call probe`, and waits at most `WAIT_S` for each answer. It writes
the answers by method (or "no answer"; over HTTP the status, content type and start of the
body), and the stdio lines that were not JSON, as JSON to `$AGENT_SEEN`; it exits 0
whatever happened. With `AGENT_DEEP=N` it first sends, over stdio, a `tools/call` whose
arguments hold a list nested N levels deep (id 99; its answer is kept under "deep").
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from typing import IO, Any

WAIT_S = 20.0
REQUESTS = [
    ("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}),
    ("tools/list", {}),
    ("tools/call", {"name": "probe", "arguments": {}}),
]


def _reader(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    for raw in stream:
        lines.put(raw)
    lines.put(None)


def _await(request_id: int, lines: queue.Queue[bytes | None], seen: dict[str, Any]) -> Any:
    """The answer to `request_id`, skipping what else arrives; "no answer" after WAIT_S."""
    while True:
        try:
            raw = lines.get(timeout=WAIT_S)
        except queue.Empty:
            return "no answer"
        if raw is None:
            return "stdout closed"
        try:
            message = json.loads(raw)
        except ValueError:
            seen["not_json"].append(raw[:200].decode("utf-8", "replace"))
            continue
        if isinstance(message, dict) and message.get("id") == request_id:
            return message
        if isinstance(message, dict) and message.get("id") is None and "error" in message:
            return message  # an error for a line no parser read, which has no id to tell


def over_http(url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {"answers": {}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    for request_id, (method, params) in enumerate(REQUESTS, start=1):
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=WAIT_S) as response:
                status, kind, body = response.status, response.headers, response.read()
        except urllib.error.HTTPError as exc:
            status, kind, body = exc.code, exc.headers, exc.read()
        except OSError as exc:
            seen["answers"][method] = f"{type(exc).__name__}: {exc}"
            continue
        text = body[:300].decode("utf-8", "replace")
        seen["answers"][method] = [status, kind.get("content-type"), text]
    return seen


def main() -> int:
    if "FLOWPROOF_MCP_URL_PROBE" in os.environ:
        with open(os.environ["AGENT_SEEN"], "w", encoding="utf-8") as out:
            json.dump(over_http(os.environ["FLOWPROOF_MCP_URL_PROBE"]), out)
        return 0
    process = subprocess.Popen(
        shlex.split(os.environ["FLOWPROOF_MCP_SERVER_PROBE"]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    lines: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_reader, args=(process.stdout, lines), daemon=True).start()
    seen: dict[str, Any] = {"answers": {}, "not_json": []}
    for method, request_id, data in _stdio_requests():
        try:
            process.stdin.write(data)
            process.stdin.flush()
        except OSError:
            seen["answers"][method] = "stdin closed"
            break
        answer = _await(request_id, lines, seen)
        seen["answers"][method] = answer if not isinstance(answer, dict) else _short(answer)
    with contextlib.suppress(OSError):  # the stand-in may be gone
        process.stdin.close()
    try:
        process.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
    with open(os.environ["AGENT_SEEN"], "w", encoding="utf-8") as out:
        json.dump(seen, out)
    return 0


def _stdio_requests() -> list[tuple[str, int, bytes]]:
    """(what the answer is kept under, the request id, the bytes sent) of each request."""
    sent = []
    for request_id, (method, params) in enumerate(REQUESTS, start=1):
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        data = (json.dumps(message) + "\n").encode()
        if method == "initialize":
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            data += (json.dumps(note) + "\n").encode()
        sent.append((method, request_id, data))
    depth = int(os.environ.get("AGENT_DEEP") or 0)
    if depth:  # written as text: json.dumps itself cannot nest this deep
        deep = "[" * depth + "]" * depth
        data = (
            '{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "probe", '
            f'"arguments": {{"x": {deep}}}}}}}\n'
        ).encode()
        sent.insert(-1, ("deep", 99, data))
    return sent


def _short(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer, with a huge result reduced to its size."""
    text = json.dumps(answer)
    return answer if len(text) < 10_000 else {"id": answer.get("id"), "size": len(text)}


if __name__ == "__main__":
    sys.exit(main())
