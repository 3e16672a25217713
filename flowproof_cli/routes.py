"""Names the boundaries agree on, below every layer that routes (the dialects, the addons).

Which request paths some flowproof boundary answers is decided by the guard
(`flowproof_addons.guard.is_claimed`) from the dialects' routes and these marks.
"""

from __future__ import annotations

#: The protocol a turn has when its trace entry names none (traces before dialect tags);
#: the OpenAI chat dialect's name (`dialects.DEFAULT_PROTOCOL` re-exports it).
DEFAULT_PROTOCOL = "openai-chat"
#: `flow.metadata` key a boundary addon sets in its `requestheaders` hook for a request it
#: answers on a listener of its own (an MCP server's port), so the guard lets it through.
CLAIMED = "flowproof_claimed"
#: `flow.metadata` key: the name of the dialect a request routed to ("" for none), set by
#: the first boundary that routes it, so a request is routed once, as the agent sent it.
ROUTED = "flowproof_routed"
#: An MCP listener answers any path containing this.
MCP_PATH_MARK = "/mcp"


def is_mcp_path(path: str) -> bool:
    return MCP_PATH_MARK in path.split("?", 1)[0]
