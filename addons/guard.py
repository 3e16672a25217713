"""Refuse everything that would make the proxy a relay.

The proxy is an unauthenticated loopback endpoint with a fixed upstream. It must not tunnel
(CONNECT), must not honour absolute-form request lines (`GET http://elsewhere/ HTTP/1.1`),
and lets through only the model routes of the dialects and the requests an MCP listener
claimed (`routes.CLAIMED`): anything else is a 404 with a JSON body saying so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mitmproxy import http

from flowproof_cli.dialects import DIALECTS, route
from flowproof_cli.routes import CLAIMED

ROUTES_ANSWERED = (
    ", ".join(
        f"...{'' if suffix.startswith(':') else '/'}{suffix}"
        for dialect in DIALECTS
        for suffix in dialect.route_suffixes
    )
    + ", and /mcp paths of declared MCP servers"
)


def is_claimed(path: str, metadata: Mapping[str, Any] | None = None) -> bool:
    """A model route, or a request a boundary claimed on an MCP server's own listener."""
    return route(path) is not None or bool(metadata and metadata.get(CLAIMED))


def _refuse(flow: http.HTTPFlow, status: int, message: str) -> None:
    body = json.dumps({"error": {"message": f"flowproof: {message}", "type": "flowproof_refused"}})
    flow.response = http.Response.make(status, body, {"content-type": "application/json"})


class RequestGuard:
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        request = flow.request
        if request.method == "CONNECT":
            _refuse(flow, 405, "CONNECT is refused: this proxy is not a tunnel")
        elif request.authority and request.http_version.startswith("HTTP/1"):
            _refuse(flow, 400, "absolute-form request lines are refused: this proxy is not a relay")

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is None and not is_claimed(flow.request.path, flow.metadata):
            _refuse(
                flow,
                404,
                f"{flow.request.method} {flow.request.path.split('?', 1)[0]} is not a model route "
                f"(flowproof answers {ROUTES_ANSWERED})",
            )


addons = [RequestGuard()]
