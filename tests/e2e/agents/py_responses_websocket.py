"""A tool loop over the OpenAI Responses API's WebSocket transport, as Codex CLI speaks it.

It upgrades `GET $OPENAI_BASE_URL/responses` to a WebSocket (wsproto, no SDK: nothing
retries or rewords what the proxy says), optionally warms the connection up
(`generate: false`), then sends one `response.create` per model call, each continuing the
previous response with `previous_response_id` and only the new items. An upgrade answered
426 falls back to HTTP `POST .../responses` with the whole conversation, as Codex does.

Knobs (environment): WS_WARMUP=1 (warm up first), WS_HTTP=1 (HTTP only, never upgrade),
WS_CITY (the city asked about, default Nairobi), WS_RAW_FRAME (sent instead of the first
`response.create`), WS_MODEL (default gpt-4o-mini). It prints the final reply, or
`error: ...` and exits 1 when an `error` event or an HTTP error comes back.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import CloseConnection, Message, TextMessage

BASE = os.environ["OPENAI_BASE_URL"].rstrip("/")
KEY = os.environ.get("OPENAI_API_KEY", "sk-placeholder")
MODEL = os.environ.get("WS_MODEL", "gpt-4o-mini")
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "type": "function",
        "name": "get_time",
        "description": "The current time.",
        "parameters": {"type": "object", "properties": {}},
    },
]


class Refused(Exception):
    """The upgrade was answered 426: speak HTTP instead."""


class Socket:
    def __init__(self) -> None:
        target = urlsplit(f"{BASE}/responses")
        self.sock = socket.create_connection((target.hostname, target.port or 80), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        head = (
            f"GET {target.path} HTTP/1.1\r\nHost: {target.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {KEY}\r\nUser-Agent: ws-agent/1.0\r\n\r\n"
        )
        self.sock.sendall(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("error: the upgrade got no answer")
            answer += chunk
        status = int(answer.split(b" ", 2)[1])
        if status == 426:
            raise Refused()
        if status != 101:
            raise SystemExit(f"error: upgrade answered {status}: {answer[:300]!r}")
        self.ws = Connection(ConnectionType.CLIENT)
        self.pending = answer.split(b"\r\n\r\n", 1)[1]
        self.text = ""

    def send(self, text: str) -> None:
        self.sock.sendall(self.ws.send(Message(data=text)))

    def events(self) -> Any:
        """Server events until one ends the response."""
        while True:
            data, self.pending = self.pending or self.sock.recv(65536), b""
            self.ws.receive_data(data or None)
            for event in self.ws.events():
                if isinstance(event, CloseConnection):
                    raise SystemExit("error: the socket closed")
                if isinstance(event, TextMessage):
                    self.text += event.data
                    if event.message_finished:
                        parsed, self.text = json.loads(self.text), ""
                        yield parsed
                        if parsed.get("type") in ("response.completed", "error"):
                            return
            if not data:
                raise SystemExit("error: the socket ended")

    def create(self, body: dict[str, Any], raw: str | None = None) -> dict[str, Any]:
        self.send(raw if raw is not None else json.dumps({"type": "response.create", **body}))
        for event in self.events():
            if event.get("type") == "error":
                raise SystemExit(f"error: {json.dumps(event)}")
            if event.get("type") == "response.completed":
                return dict(event["response"])
        raise SystemExit("error: no response.completed")

    def close(self) -> None:
        self.sock.sendall(self.ws.send(CloseConnection(code=1000)))
        self.sock.close()


def post(body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{BASE}/responses",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"error: HTTP {exc.code}: {exc.read()[:500]!r}") from None


def tool(name: str, arguments: str) -> str:
    if name == "get_weather":
        return json.dumps({"city": json.loads(arguments).get("city"), "forecast": "sunny"})
    return json.dumps({"now": "2026-01-01T09:00:00Z"})


def main() -> int:
    prompt = os.environ.get("FLOWPROOF_PROMPT") or (sys.argv[1] if len(sys.argv) > 1 else "")
    city = os.environ.get("WS_CITY", "Nairobi")
    prompt = prompt.replace("Nairobi", city)
    base: dict[str, Any] = {"model": MODEL, "tools": TOOLS, "store": False}
    conversation: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    sock: Socket | None = None
    if not os.environ.get("WS_HTTP"):
        try:
            sock = Socket()
        except Refused:
            sock = None
    previous: str | None = None
    items = list(conversation)
    if sock is not None and os.environ.get("WS_WARMUP"):
        previous = sock.create({**base, "input": [], "generate": False})["id"]
    raw = os.environ.get("WS_RAW_FRAME")
    for _ in range(8):
        if sock is not None:
            body = {**base, "input": items, "previous_response_id": previous, "stream": True}
            response = sock.create(body, raw)
            raw = None
        else:
            response = post({**base, "input": conversation})
        output = [item for item in response.get("output") or [] if isinstance(item, dict)]
        calls = [item for item in output if item.get("type") == "function_call"]
        if not calls:
            text = "".join(
                part.get("text", "")
                for item in output
                if item.get("type") == "message"
                for part in item.get("content") or []
            )
            print(text)
            if sock is not None:
                sock.close()
            return 0
        results = [
            {
                "type": "function_call_output",
                "call_id": call["call_id"],
                "output": tool(call["name"], call["arguments"]),
            }
            for call in calls
        ]
        conversation += [*output, *results]
        previous, items = response["id"], results
    print("error: too many model calls")
    return 1


if __name__ == "__main__":
    sys.exit(main())
