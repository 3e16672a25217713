"""The one place a flow's proxy and its addon list are built.

Order is mitmproxy's hook order: the guard refuses what no boundary serves, the MCP and
model boundaries answer or forward, then the addon objects of the flow's matcher scripts run
as they would under `mitmdump -s addons/model.py -s script.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowproof_addons.guard import RequestGuard
from flowproof_addons.mcp_http import McpHttpBoundary
from flowproof_addons.model import ModelBoundary
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.errors import PortInUseError
from flowproof_cli.runner.mcp_servers import McpServers
from flowproof_cli.runner.proxy import ProxyHost


class Boundaries:
    def __init__(
        self, session: CassetteSession, mcp: McpServers | None, user_addons: Sequence[Any] = ()
    ):
        self.session = session
        self.mcp = mcp
        self.model = ModelBoundary()
        self.mcp_http = McpHttpBoundary()
        self.addons: list[Any] = [RequestGuard(), self.mcp_http, self.model, *user_addons]

    def proxy(self, port: int = 0) -> ProxyHost:
        return ProxyHost(self.addons, port=port)

    async def attach(self, proxy: ProxyHost) -> None:
        """Serve the model session on the proxy's port and open a listener per `url:` MCP
        server, each answered by its own session."""
        self.model.sessions[proxy.port] = self.session
        mcp = self.mcp
        if mcp is None:
            return
        for name, port in mcp.http_ports():
            try:
                bound = await proxy.add_listener(port)
            except PortInUseError:
                raise PortInUseError(
                    port,
                    f"port {port} of the MCP server '{name}' is already in use on 127.0.0.1. "
                    "Fix: stop whatever listens there, or choose another `port` for it",
                ) from None
            self.mcp_http.sessions[bound] = mcp.bind(name, bound)
