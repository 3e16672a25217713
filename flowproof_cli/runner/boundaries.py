"""The one place the proxy and its addon list are built: one master for a whole run.

Order is mitmproxy's hook order: the guard refuses what no boundary serves, the MCP and
model boundaries answer or forward, then the addon objects of a flow's matcher scripts run
as they would under `mitmdump -s addons/model.py -s script.py`.

Every flow of a run shares the master and its boundaries; what keeps flows apart is the
listening port. A flow opens its own listeners (`ProxyHub.listen`): the model boundary and
the MCP boundary answer each request from the session registered for the port it arrived
on, and a flow's matcher addons see only the traffic of that flow's ports (`PortScoped`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from flowproof_addons.guard import RequestGuard
from flowproof_addons.mcp_http import McpHttpBoundary
from flowproof_addons.model import ModelBoundary
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.errors import PortInUseError
from flowproof_cli.runner.mcp_servers import McpServers
from flowproof_cli.runner.proxy import ProxyHost

# Hooks that concern the whole master, not one flow's traffic: passed through unscoped.
_LIFECYCLE_HOOKS = frozenset({"load", "configure", "running", "done"})


def _port_of(value: Any) -> int | None:
    """The listening port a hook argument belongs to (a flow, a connection, its data)."""
    for candidate in (getattr(value, "client_conn", None), getattr(value, "client", None), value):
        sockname = getattr(candidate, "sockname", None)
        if sockname:
            return int(sockname[1])
    return None


class PortScoped:
    """A matcher script's addon object, seeing only the traffic of its own flow's ports.

    mitmproxy calls every addon for every event; without this, one flow's `request` hook
    would also see the requests of the flows running beside it.
    """

    def __init__(self, addon: Any, ports: set[int], name: str):
        self._addon = addon
        self._ports = ports  # live: the flow's MCP listeners join after the model's
        self.name = name  # unique in the master, even for one script in two flows

    def _mine(self, args: Sequence[Any]) -> bool:
        port = _port_of(args[0]) if args else None
        return port is None or port in self._ports

    def __getattr__(self, hook: str) -> Any:
        if hook.startswith("_") or hook == "addons":
            raise AttributeError(hook)
        target = getattr(self._addon, hook)
        if not callable(target) or hook in _LIFECYCLE_HOOKS:
            return target
        if hook == "update":
            return self._scoped_update(target)
        if inspect.iscoroutinefunction(target):

            async def scoped_async(*args: Any) -> Any:
                return await target(*args) if self._mine(args) else None

            return scoped_async

        def scoped(*args: Any) -> Any:
            return target(*args) if self._mine(args) else None

        return scoped

    def _scoped_update(self, target: Callable[..., Any]) -> Callable[..., Any]:
        def update(flows: Sequence[Any]) -> Any:
            own = [flow for flow in flows if self._mine([flow])]
            return target(own) if own else None

        return update


class ProxyHub:
    """One embedded mitmproxy for a whole run, started on first use, stopped at the end."""

    def __init__(self) -> None:
        self.model = ModelBoundary()
        self.mcp_http = McpHttpBoundary()
        self.host = ProxyHost([RequestGuard(), self.mcp_http, self.model], port=None)
        self._started = False
        self._lock = asyncio.Lock()
        self._scoped = 0

    async def start(self) -> None:
        async with self._lock:
            if not self._started:
                await self.host.start()
                self._started = True

    async def stop(self) -> None:
        async with self._lock:
            if self._started:
                self._started = False
                await self.host.stop()

    async def __aenter__(self) -> ProxyHub:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @contextlib.asynccontextmanager
    async def listen(
        self,
        session: CassetteSession,
        mcp: McpServers | None = None,
        user_addons: Sequence[Any] = (),
        *,
        port: int = 0,
    ) -> AsyncIterator[int]:
        """One flow's listeners: the model's (its port is yielded) and one per `url:` MCP
        server, each answered by its own session; all closed again on exit."""
        await self.start()
        bound = await self.host.add_listener(port)
        ports = {bound}
        self.model.sessions[bound] = session
        scoped: list[PortScoped] = []
        try:
            if mcp is not None:
                await self._open_mcp(mcp, ports)
            self._add_scoped(user_addons, ports, bound, scoped)
            yield bound
        finally:
            for addon in scoped:
                with contextlib.suppress(Exception):
                    self.host.master.addons.remove(addon)  # its `done` hook runs
            for listener in ports:
                self.model.sessions.pop(listener, None)
                self.mcp_http.sessions.pop(listener, None)
                await self.host.remove_listener(listener)

    async def _open_mcp(self, mcp: McpServers, ports: set[int]) -> None:
        for name, port in mcp.http_ports():
            try:
                bound = await self.host.add_listener(port)
            except PortInUseError:
                raise PortInUseError(
                    port,
                    f"port {port} of the MCP server '{name}' is already in use on 127.0.0.1. "
                    "Fix: stop whatever listens there, or choose another `port` for it",
                ) from None
            ports.add(bound)
            self.mcp_http.sessions[bound] = mcp.bind(name, bound)

    def _add_scoped(
        self, addons: Sequence[Any], ports: set[int], port: int, added: list[PortScoped]
    ) -> None:
        """Join the flow's matcher addons to the running master, as a script reload does."""
        from mitmproxy import hooks  # noqa: PLC0415 (loaded with the master already)

        manager = self.host.master.addons
        for addon in addons:
            self._scoped += 1
            name = f"{type(addon).__name__.lower()}@{port}#{self._scoped}"
            wrapper = PortScoped(addon, ports, name)
            manager.add(wrapper)
            added.append(wrapper)
            options = set(manager.master.options.keys())
            manager.invoke_addon_sync(wrapper, hooks.ConfigureHook(options))
            manager.invoke_addon_sync(wrapper, hooks.RunningHook())
