"""The order tools as an MCP server (the `mcp` 2.x SDK's MCPServer, over stdio).

Each executed call appends a line to ORDERS_LOG (orders.py), so a test can tell the server
ran at record and never at replay.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "mcp_fixtures"))
import sdk_path

sdk_path.use_mcp2()  # before any `mcp` import

from mcp.server.mcpserver import MCPServer  # noqa: E402
from orders import run_tool  # noqa: E402

server = MCPServer("orders", version="1", instructions="An online shop's order desk.")


@server.tool()
def lookup_order(order_id: str) -> str:
    """Look up an order's delivery status."""
    return run_tool("lookup_order", {"order_id": order_id})


@server.tool()
def cancel_order(order_id: str) -> str:
    """Cancel an order. Destructive."""
    return run_tool("cancel_order", {"order_id": order_id})


@server.tool()
def issue_refund(order_id: str) -> str:
    """Refund an order in full. Destructive."""
    return run_tool("issue_refund", {"order_id": order_id})


if __name__ == "__main__":
    server.run("stdio")
