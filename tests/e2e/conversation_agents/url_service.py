"""A support service over HTTP (stdlib `http.server` on 127.0.0.1) that keeps one history
per `conversation_id`.

    python url_service.py PORT

`POST /chat {"prompt": ..., "conversation_id": ..., "turn": k}` appends the prompt to that
conversation's history, runs the openai-SDK tool loop (OPENAI_BASE_URL from the environment
it was started with) and answers `{"reply": ...}`. Turn 1 starts the conversation afresh, so
a replay of a recorded conversation (the same id) does not continue the recording's; a POST
without a `conversation_id` is a conversation of its own. SERVICE_FAIL_TURN=k answers turn k
with a 500 (a red path).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from openai import OpenAI
from orders import SYSTEM, chat_tools, chat_turn

CLIENT = OpenAI(max_retries=0)
HISTORIES: dict[str, list[dict[str, Any]]] = {}
LOCKS: dict[str, threading.Lock] = {}
GUARD = threading.Lock()


def reply_to(body: dict[str, Any]) -> str:
    conversation = str(body.get("conversation_id") or uuid.uuid4())
    with GUARD:
        if body.get("turn") in (None, 1):  # turn 1 starts the conversation (over)
            HISTORIES.pop(conversation, None)
        messages = HISTORIES.setdefault(conversation, [{"role": "system", "content": SYSTEM}])
        lock = LOCKS.setdefault(conversation, threading.Lock())
    with lock:  # one turn at a time per conversation
        messages.append({"role": "user", "content": str(body["prompt"])})
        return chat_turn(CLIENT, messages, chat_tools())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            if str(body.get("turn")) == os.environ.get("SERVICE_FAIL_TURN"):
                self.answer(500, {"error": f"turn {body['turn']} failed on purpose"})
                return
            self.answer(200, {"reply": reply_to(body)})
        except Exception as exc:
            self.answer(500, {"error": f"{type(exc).__name__}: {exc}"})


def main() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/chat", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
