"""The one place the proxy and its addon list are built: one master for a whole run.

Order is mitmproxy's hook order: the guard refuses what no boundary serves, the MCP and
model boundaries answer or forward, the backstop refuses whatever is still unanswered (and
fails its flow), then the addon objects of a flow's matcher scripts run as they would
under `mitmdump -s addons/model.py -s script.py`.

Every flow of a run shares the master and its boundaries; what keeps flows apart is the
listening port. A flow opens its own listeners (`RunProxy.listen`): the model boundary and
the MCP boundary answer each request from the session registered for the port it arrived
on, and a flow's matcher addons see only the traffic of that flow's ports (`PortScoped`,
runner/port_scoped.py). Their hooks are user code: they run in their script's thread within
its budget (match/user_code.py), never on the event loop every flow shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowproof_cli.cassette import CassetteSession
from flowproof_cli.errors import PortInUseError
from flowproof_cli.runner.listeners import bind_loopback, port_of
from flowproof_cli.runner.mcp_servers import McpServers
from flowproof_cli.runner.port_scoped import PortScoped

if TYPE_CHECKING:
    from flowproof_cli.match.addons import ScriptAddon
    from flowproof_cli.mcp.http import HttpMcpSession
    from flowproof_cli.runner.proxy_engine import ProxyEngine


class _StopOnFailure:
    """Cancels the task driving a flow when its listeners cannot be served (the engine did
    not start): the agent's calls would wait in the listen backlog until the flow's timeout.
    The failure itself is raised when the listeners close."""

    def __init__(self, serving: asyncio.Future[None]) -> None:
        self.fired = False
        self._settled = False
        self._task = asyncio.current_task()
        serving.add_done_callback(self._on_done)

    def _on_done(self, serving: asyncio.Future[None]) -> None:
        # Runs while the task waits somewhere in the flow's body, where the cancellation
        # lands; once the body is over (`settle`), the closing raises the failure instead.
        if self._settled or self._task is None:
            return
        if serving.cancelled() or serving.exception() is None:
            return
        self.fired = True
        self._task.cancel()

    def settle(self) -> None:
        """The body is over: take back the cancellation this sent, so the task goes on to
        close the listeners and raise the failure."""
        self._settled = True
        if self.fired and self._task is not None and self._task.cancelling():
            self._task.uncancel()


@dataclass(frozen=True)
class _Joining:
    """A flow's matcher addons on their way into the proxy, and the ones that joined."""

    addons: Sequence[ScriptAddon]
    ports: set[int]
    joined: list[PortScoped]
    fail: Callable[[str], None]


class RunProxy:
    """One embedded mitmproxy for a whole run, loaded and started on first use.

    A flow's listening sockets are bound before the engine is even imported, so its agent
    starts while mitmproxy loads; the engine then accepts on them (`runner/listeners.py`).
    """

    def __init__(self, addons: Sequence[Any] = (), *, upstream_tls: bool = True) -> None:
        self._extra = list(addons)  # after the boundaries (`run --inspect`'s tap)
        self._upstream_tls = upstream_tls  # False when no flow of the run records
        # Shared with the boundaries once they exist: each request finds its session here
        # by the port it arrived on.
        self.model_sessions: dict[int, CassetteSession] = {}
        self.mcp_sessions: dict[int, HttpMcpSession] = {}
        self.host: ProxyEngine | None = None
        self._lock = asyncio.Lock()
        self._scoped = 0

    async def start(self) -> ProxyEngine:
        async with self._lock:
            if self.host is None:
                self.host = await self._start_engine()
            return self.host

    async def _start_engine(self) -> ProxyEngine:
        from flowproof_addons.guard import Backstop, RequestGuard  # noqa: PLC0415 (lazy)
        from flowproof_addons.mcp_http import McpHttpBoundary  # noqa: PLC0415
        from flowproof_addons.model import ModelBoundary  # noqa: PLC0415
        from flowproof_cli.runner.proxy_engine import ProxyEngine  # noqa: PLC0415

        model, mcp_http = ModelBoundary(), McpHttpBoundary()
        model.sessions = self.model_sessions
        mcp_http.sessions = self.mcp_sessions
        host = ProxyEngine(
            [RequestGuard(), mcp_http, model, *self._extra, Backstop()],
            port=None,
            upstream_tls=self._upstream_tls,
            on_problem=self._listener_problem,
        )
        await host.start()
        return host

    def _listener_problem(self, port: int, message: str) -> None:
        """A listener could not serve its agent as asked (too many connections, no
        descriptor left to accept one): the flow it belongs to fails, saying so."""
        if (mcp := self.mcp_sessions.get(port)) is not None:
            mcp.errors.append(f"the MCP server '{mcp.server}': {message}")
        elif (model := self.model_sessions.get(port)) is not None:
            model.errors.append(message)

    async def stop(self) -> None:
        async with self._lock:
            host, self.host = self.host, None
            if host is not None:
                await host.stop()

    async def __aenter__(self) -> RunProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @contextlib.asynccontextmanager
    async def listen(
        self,
        session: CassetteSession,
        mcp: McpServers | None = None,
        user_addons: Sequence[ScriptAddon] = (),
        *,
        port: int = 0,
    ) -> AsyncIterator[int]:
        """One flow's listeners: the model's (its port is yielded) and one per `url:` MCP
        server, each answered by its own session; all closed again on exit. They are bound
        at once and served as soon as the engine is up; a failed start is raised on exit.
        A matcher addon's hook that fails fails the session's flow."""
        sockets = [bind_loopback(port)]
        bound = port_of(sockets[0])
        try:
            if mcp is not None:
                sockets.extend(self._bind_mcp(mcp))
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        ports = {port_of(sock) for sock in sockets}
        self.model_sessions[bound] = session
        scoped: list[PortScoped] = []

        def fail(message: str) -> None:
            session.errors.append(f"flowproof: {message}")

        joining = _Joining(user_addons, ports, scoped, fail)
        serving = asyncio.ensure_future(self._serve(sockets, joining))
        stopped = _StopOnFailure(serving)
        try:
            yield bound
        except asyncio.CancelledError:
            if not stopped.fired:
                raise
        finally:
            stopped.settle()
            await self._close(serving, sockets, ports, scoped)

    def _bind_mcp(self, mcp: McpServers) -> list[socket.socket]:
        bound: list[socket.socket] = []
        try:
            for name, port in mcp.http_ports():
                try:
                    sock = bind_loopback(port)
                except PortInUseError:
                    raise PortInUseError(
                        port,
                        f"port {port} of the MCP server '{name}' is already in use on "
                        "127.0.0.1. Fix: stop whatever listens there, or choose another `port` "
                        "for it",
                    ) from None
                bound.append(sock)
                self.mcp_sessions[port_of(sock)] = mcp.bind(name, port_of(sock))
        except BaseException:
            for sock in bound:
                sock.close()
            raise
        return bound

    async def _serve(self, sockets: list[socket.socket], joining: _Joining) -> None:
        """The engine up, the flow's matcher addons joined, then its sockets accepted on."""
        host = await self.start()
        await self._join(host, joining)
        for sock in sockets:
            await host.serve(sock)

    async def _close(
        self,
        serving: asyncio.Future[None],
        sockets: list[socket.socket],
        ports: set[int],
        scoped: list[PortScoped],
    ) -> None:
        failure: BaseException | None = None
        if not serving.done():
            serving.cancel()
        try:
            await serving
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # the engine did not start: the flow could not run
            failure = exc
        host = self.host
        if host is not None:
            for addon in scoped:
                with contextlib.suppress(Exception):
                    host.master.addons.remove(addon)
        for listener in ports:
            self.model_sessions.pop(listener, None)
            self.mcp_sessions.pop(listener, None)
            if host is not None:
                await host.remove_listener(listener)
        for sock in sockets:
            sock.close()  # never served, or already closed with its server
        for addon in scoped:  # last: a cancellation here leaves nothing of the proxy open
            await addon.finish()
        if failure is not None:
            raise failure

    async def _join(self, host: ProxyEngine, joining: _Joining) -> None:
        """Join the flow's matcher addons to the running master, as a script reload does:
        each one's `load`, `configure` and `running` first, in its script's thread; one
        whose hook failed stays out (its flow has failed)."""
        manager = host.master.addons
        port = min(joining.ports)
        for addon in joining.addons:
            self._scoped += 1
            name = f"{addon.name.lower()}@{port}#{self._scoped}"
            wrapper = PortScoped(addon, joining.ports, name, joining.fail)
            if await wrapper.start(manager.master):
                manager.add(wrapper)
                joining.joined.append(wrapper)
