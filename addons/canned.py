"""Canned model replies: a small valid answer in every dialect, for `flowproof doctor`.

The doctor checks wiring, not behaviour: whatever the agent asks, it gets a short final
text answer shaped exactly like the real API's (each dialect's `canned_response`, an
endpoint's a small valid answer of its own kind, rendered by the dialect itself, so a
streaming client gets the same SSE a replay would send). Agents then finish their loop in
one turn, and no model or key is needed. A request in JSON mode gets JSON text, an instance
of its schema when it gives one (`dialects/json_mode.py`), so a client that parses the
answer does not retry. `flowproof init` runs the same replies through `ToolCollector`, which
also keeps the tools each request offered.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from mitmproxy import http

from flowproof_cli.dialects import CHAT, Dialect, Rendered, route
from flowproof_cli.dialects.json_mode import json_answer, json_mode
from flowproof_cli.dialects.websocket import is_upgrade

CANNED_TEXT = "Hello from flowproof doctor."
JSON = dict[str, Any]


def canned_text(dialect: Dialect, body: JSON) -> str:
    """CANNED_TEXT, or JSON text when the request asks for JSON (with a schema: an instance)."""
    mode = json_mode(dialect.name, body)
    if mode is None:
        return CANNED_TEXT
    return json.dumps(json_answer(mode, CANNED_TEXT), ensure_ascii=False)


def canned_reply(dialect: Dialect, path: str, raw_body: bytes) -> Rendered:
    """The canned answer to one request, as JSON or as the dialect's stream."""
    try:
        body = {} if dialect.method == "GET" else json.loads(raw_body or b"null")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        message = "flowproof doctor: the request is not a JSON object"
        error = dialect.error_body(message, "invalid", 400)
        return Rendered(400, "application/json", json.dumps(error).encode())
    request = dialect.normalize(path, body)
    response = dialect.canned_response(request, canned_text(dialect, body))
    return dialect.render(request, 200, response, stream=dialect.wants_stream(request))


class CannedReplies:
    """mitmproxy addon (after the guard): answer every model route, count what arrived."""

    def __init__(self) -> None:
        self.model_requests: Counter[tuple[str, str]] = Counter()  # (METHOD /path, dialect)
        self.refused: Counter[str] = Counter()  # requests the guard answered

    def request(self, flow: http.HTTPFlow) -> None:
        where = f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"
        if flow.response is not None:
            self.refused[where] += 1
            return
        dialect = route(flow.request.path, flow.request.headers, flow.request.method)
        if dialect is None:
            return
        if is_upgrade(flow.request.headers):  # the doctor answers over HTTP: the client falls back
            message = "flowproof doctor answers over HTTP: ask again without the WebSocket"
            error = json.dumps(dialect.error_body(message, "websocket_not_served", 426))
            headers = {"content-type": "application/json", "sec-websocket-version": "13"}
            flow.response = http.Response.make(426, error, headers)
            return
        self.model_requests[(where, dialect.name)] += 1
        rendered = canned_reply(dialect, flow.request.path, flow.request.get_content() or b"")
        flow.response = http.Response.make(
            rendered.status, rendered.body, {"content-type": rendered.content_type}
        )


class ToolCollector(CannedReplies):
    """Canned replies that also keep, in order, the tools each model request offered."""

    def __init__(self) -> None:
        super().__init__()
        self.tools: dict[str, None] = {}  # an ordered set of tool names
        self.dialects: dict[str, None] = {}

    def request(self, flow: http.HTTPFlow) -> None:
        dialect = route(flow.request.path, flow.request.headers, flow.request.method)
        if flow.response is None and dialect is not None and dialect.kind == CHAT:
            try:
                body = json.loads(flow.request.get_content() or b"null")
            except ValueError:
                body = None
            if isinstance(body, dict):
                self.dialects[dialect.name] = None
                outline = dialect.outline(dialect.normalize(flow.request.path, body))
                self.tools.update(dict.fromkeys(outline.tools))
        super().request(flow)
