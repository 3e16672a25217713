"""The OpenAI Responses API over WebSocket, as frames (`wss://.../v1/responses`).

The client upgrades a `GET .../responses` to a WebSocket and sends one text frame per
request: a `response.create` event, which is the Responses request body with
`"type": "response.create"` added (`generate: false` warms the connection up without a
model call; `previous_response_id` continues from a response of the same connection). The
server answers each with the events an HTTP stream of the same request carries, one JSON
text frame each (no SSE framing), ending in `response.completed`; a request that fails is
answered with an `error` event carrying the HTTP status it would have had.

So a frame IS a request body, and an HTTP stream's events ARE the frames: this module only
translates, and the session matches, records and renders the request as it does over HTTP.
That makes the trace transport-blind where it honestly is (a turn recorded over HTTP can
serve a WebSocket client and the other way round, as `stream` can today); what exists only
on the socket (the warm-up's `generate: false`) is a request field, matched like any other.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from flowproof_cli.dialects.base import Rendered

#: The transport a turn recorded over a WebSocket names in the trace (`transport:`); a turn
#: recorded over HTTP names none.
WEBSOCKET = "websocket"
#: The one client event flowproof reads on the socket.
CREATE = "response.create"
#: Server events that end one response: its answer is whole.
COMPLETED = ("response.completed", "response.incomplete")
#: Server events that end one response as a failure.
FAILED = ("response.failed", "error")
#: The GUID a WebSocket accept key is derived with (RFC 6455, section 1.3).
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def is_upgrade(headers: Any) -> bool:
    """Whether a request's headers ask to switch to WebSocket."""
    return str(headers.get("upgrade", "")).strip().lower() == "websocket"


def accept_key(key: str) -> str:
    """The `Sec-WebSocket-Accept` answering a client's `Sec-WebSocket-Key`."""
    digest = hashlib.sha1(key.strip().encode() + _GUID, usedforsecurity=False).digest()
    return base64.b64encode(digest).decode()


@dataclass(frozen=True)
class Unreadable:
    """A client frame that is not a `response.create` event: why, as the agent is told."""

    reason: str


def request_of_frame(content: bytes) -> dict[str, Any] | Unreadable:
    """The Responses request body a `response.create` frame carries. A socket answers in
    events only, so the body always asks for the stream (`stream` is a transport field:
    never stored, never matched)."""
    try:
        event = json.loads(content)
    except (ValueError, RecursionError):
        return Unreadable("it is not JSON")
    if not isinstance(event, dict):
        return Unreadable("it is not a JSON object")
    kind = event.get("type")
    if kind != CREATE:
        said = json.dumps(kind, ensure_ascii=False)[:80] if kind is not None else "missing"
        return Unreadable(f"its `type` is {said}, not {CREATE!r}")
    body = {key: value for key, value in event.items() if key != "type"}
    body["stream"] = True
    return body


def frame_of_request(body: dict[str, Any]) -> bytes:
    """The `response.create` frame carrying a request body."""
    return json.dumps({"type": CREATE, **body}, ensure_ascii=False).encode()


def frames_of(rendered: Rendered) -> list[bytes]:
    """An answer as the frames the socket sends: each event of a synthesized stream, or
    one `error` event for an error (its status and the dialect's error body)."""
    if rendered.status == 200 and rendered.content_type.startswith("text/event-stream"):
        return [
            line[len(b"data: ") :]
            for line in rendered.body.splitlines()
            if line.startswith(b"data: ")
        ]
    return [error_frame(rendered.status, rendered.body)]


def error_frame(status: int, body: bytes) -> bytes:
    """An `error` event as the service sends a failed request on the socket."""
    try:
        parsed: Any = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        error = {"message": body.decode("utf-8", "replace"), "type": "flowproof_error"}
    return json.dumps({"type": "error", "status": status, "error": error}).encode()


def event_type(content: bytes) -> tuple[str | None, dict[str, Any] | None]:
    """A server frame's event type and the event (None, None when it is not one)."""
    try:
        event = json.loads(content)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(event, dict):
        return None, None
    kind = event.get("type")
    return (kind if isinstance(kind, str) else None), event


def failure_of(event: dict[str, Any]) -> tuple[int, bytes]:
    """The HTTP status and JSON error body a failing event stands for (record fails on it,
    as on an HTTP error answer)."""
    if event.get("type") == "error":
        status = event.get("status")
        error = event.get("error", event)
        code = status if isinstance(status, int) and 400 <= status < 600 else 500
        return code, json.dumps({"error": error}).encode()
    response = event.get("response")
    error = response.get("error") if isinstance(response, dict) else None
    return 500, json.dumps({"error": error or {"message": "the response failed"}}).encode()
