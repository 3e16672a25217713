"""Which request paths some flowproof boundary answers (everything else is refused)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowproof_cli.dialects import route

#: `flow.metadata` key a boundary addon sets in its `requestheaders` hook for a request it
#: answers on a listener of its own (an MCP server's port), so the guard lets it through.
CLAIMED = "flowproof_claimed"
#: An MCP listener answers any path containing this.
MCP_PATH_MARK = "/mcp"


def is_claimed(path: str, metadata: Mapping[str, Any] | None = None) -> bool:
    return route(path) is not None or bool(metadata and metadata.get(CLAIMED))


def is_mcp_path(path: str) -> bool:
    return MCP_PATH_MARK in path.split("?", 1)[0]
