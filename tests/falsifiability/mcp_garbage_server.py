"""A stdio MCP server that misbehaves on purpose, one way per run (stdlib only).

    python mcp_garbage_server.py MODE

It answers `initialize` and `tools/list` (one tool, `probe`) like a real server, then breaks
on `tools/call`, or before anything, by MODE:

* ``banner``: a line that is not JSON-RPC on stdout before it reads anything
* ``garbage``: a log line on stdout, then the right answer
* ``half``: half of the answer's JSON on a line of its own, and nothing more (it stays up)
* ``huge``: a valid answer of ``HUGE_BYTES`` (10 MB) of text on one line
* ``endless``: bytes without a newline, until it is killed
* ``die``: exits with code 3 without answering (a word on stderr first)
* ``die-partial``: half an answer with no newline, then exits with code 3
* ``deep``: an answer whose result nests ``DEEP_LEVELS`` lists deep (too deep to parse)
* ``silent``: reads the call and never answers it, staying up (until killed)
* ``progress``: a slow call: ``notifications/progress`` for the call's progressToken every
  ``PROGRESS_EVERY_S`` for ``PROGRESS_FOR_S``, then the right answer
* ``lines FILE``: FILE's bytes on stdout as they are, then the right answer
* ``ok``: no misbehaviour at all (the green path)
"""

from __future__ import annotations

import json
import sys
import time

HUGE_BYTES = 10 * 1024 * 1024
DEEP_LEVELS = 5000
PROGRESS_EVERY_S = 0.2
PROGRESS_FOR_S = 3.0
TOOL = {"name": "probe", "description": "A tool.", "inputSchema": {"type": "object"}}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id: object, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def misbehave(mode: str, request_id: object) -> None:
    """What MODE does with a tools/call."""
    text = {"content": [{"type": "text", "text": "probed"}], "isError": False}
    if mode == "garbage":
        print("INFO probe called", flush=True)
        answer(request_id, text)
    elif mode == "half":
        whole = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": text})
        print(whole[: len(whole) // 2], flush=True)
    elif mode == "huge":
        answer(request_id, {"content": [{"type": "text", "text": "x" * HUGE_BYTES}]})
    elif mode == "endless":
        while True:
            sys.stdout.write("x" * 65536)
            sys.stdout.flush()
    elif mode == "lines":
        with open(sys.argv[2], "rb") as lines:
            sys.stdout.buffer.write(lines.read())
        sys.stdout.flush()
        answer(request_id, text)
    elif mode == "deep":
        nested = "[" * DEEP_LEVELS + "]" * DEEP_LEVELS
        sys.stdout.write(
            f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "result": {nested}}}\n'
        )
        sys.stdout.flush()
    elif mode == "silent":
        pass  # the call is read and never answered; the loop reads on
    elif mode in ("die", "die-partial"):
        if mode == "die-partial":
            sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "resu')
            sys.stdout.flush()
        print("probe server: fatal error", file=sys.stderr, flush=True)
        sys.exit(3)
    else:
        answer(request_id, text)


def report_progress(token: object) -> None:
    """A slow tool that says so: progress notifications, longer than the call's bound."""
    for step in range(int(PROGRESS_FOR_S / PROGRESS_EVERY_S)):
        time.sleep(PROGRESS_EVERY_S)
        params = {"progressToken": token, "progress": step + 1}
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})


def main() -> int:
    mode = sys.argv[1]
    if mode == "banner":
        print("probe server v1 starting", flush=True)
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or method is None:
            continue
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            answer(request_id, {"protocolVersion": version, "capabilities": {"tools": {}}})
        elif method == "tools/list":
            answer(request_id, {"tools": [TOOL]})
        elif method == "tools/call" and mode == "progress":
            report_progress(message.get("params", {}).get("_meta", {}).get("progressToken"))
            misbehave("ok", request_id)
        elif method == "tools/call":
            misbehave(mode, request_id)
        else:
            answer(request_id, {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
