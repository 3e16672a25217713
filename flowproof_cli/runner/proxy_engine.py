"""An in-process mitmproxy master, bound to 127.0.0.1, carrying only flowproof's addons.

Why not DumpMaster: it loads ~30 default addons whose hooks run on every flow; a master with
the five it needs answers faster and starts sooner. Lazy connections matter: with the
default eager strategy mitmproxy dials the (dummy) upstream even for requests an addon
answered, and resets the client when that fails. The chain always ends with the backstop
(`flowproof_addons.guard.Backstop`): a request no addon answered or forwarded on purpose is
refused there, never sent on to the placeholder target.

Each listener serves a bounded number of connections, running out of file descriptors while
accepting is reported to the flow of that listener (`runner/descriptors.py`), and errors the
loop or the engine log outside mitmproxy's run are said once per kind (`runner/loop_errors.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import socket
from collections.abc import Sequence
from typing import Any

from flowproof_cli.runner import minimal_mitmproxy

minimal_mitmproxy.install()  # before mitmproxy.master: skips the ~30 default addons' imports

from mitmproxy import addonmanager, exceptions, hooks, master, options, tls  # noqa: E402
from mitmproxy.addons import core, disable_h2c, next_layer, proxyserver, tlsconfig  # noqa: E402
from mitmproxy.proxy import mode_servers, mode_specs  # noqa: E402
from OpenSSL import SSL  # noqa: E402

from flowproof_addons.connections import cancel_client_reader  # noqa: E402
from flowproof_addons.guard import Backstop  # noqa: E402
from flowproof_cli.errors import ConfigError  # noqa: E402
from flowproof_cli.process import held_temp_folder, remove_held_folder  # noqa: E402
from flowproof_cli.runner import loop_errors  # noqa: E402
from flowproof_cli.runner.descriptors import AcceptWatch, ConnectionCap, Problem  # noqa: E402
from flowproof_cli.runner.listeners import BACKLOG, bind_loopback, port_of  # noqa: E402

# Never dialled: replay answers everything in the request hook, and record rewrites each
# forwarded request to the configured upstream. A reverse mode still needs a target.
_PLACEHOLDER_TARGET = "http://127.0.0.1:9"
_START_TIMEOUT_S = 10.0
_CLOSE_TIMEOUT_S = 2.0


def _on_port(handler: Any, port: int | None) -> bool:
    if port is None:
        return True
    sockname: Any = getattr(handler.client, "sockname", None)
    return sockname is not None and int(sockname[1]) == port


async def _close_client_connections(server: Any, port: int | None = None) -> None:
    """End every live client connection so its task finishes rather than being cancelled.

    With `port`, only the connections accepted on that listener. A long-lived service keeps
    its HTTP connections to the proxy open (keep-alive). Left open, their tasks are
    cancelled when the event loop closes, and Python 3.12.1's asyncio then logs a spurious
    `Exception in callback ... CancelledError` traceback for each. Cancelling the inner
    connection handler lets mitmproxy close the client cleanly.
    """
    with contextlib.suppress(Exception):
        for handler in list(server.connections.values()):
            if not _on_port(handler, port):
                continue
            cancel_client_reader(handler)
    deadline = asyncio.get_running_loop().time() + _CLOSE_TIMEOUT_S
    while asyncio.get_running_loop().time() < deadline and any(
        _on_port(handler, port) for handler in list(server.connections.values())
    ):
        await asyncio.sleep(0.005)


class _Started:
    """Sets an event from mitmproxy's `running` hook: the master is up, without polling."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def running(self) -> None:
        self.event.set()


class _TlsRefused:
    """For a master without mitmproxy's TLS addon: a client's TLS handshake fails at once.

    With no TLS context mitmproxy logs an error and leaves the client waiting for its
    handshake until the client's own timeout. A context without a certificate makes the
    handshake fail with an alert instead, so an agent pointed at `https://` learns at once.
    """

    def tls_start_client(self, data: tls.TlsData) -> None:
        data.ssl_conn = SSL.Connection(SSL.Context(SSL.TLS_SERVER_METHOD))
        data.ssl_conn.set_accept_state()


class _CachedDispatch(addonmanager.AddonManager):
    """mitmproxy's addon manager, finding each event's handlers once, not per event.

    The stock manager walks every addon for every event (and most define few hooks); on the
    replay path that walk is a measurable share of each turn. The list is rebuilt whenever
    an addon joins or leaves (a flow's matcher addons do, mid-run).
    """

    def __init__(self, master_: Any) -> None:
        super().__init__(master_)
        self._handlers: dict[str, list[Any]] = {}

    def register(self, addon: Any) -> Any:
        self._handlers.clear()
        return super().register(addon)

    def remove(self, addon: Any) -> None:
        self._handlers.clear()
        super().remove(addon)

    async def trigger_event(self, event: hooks.Hook) -> None:
        handlers = self._handlers.get(event.name)
        if handlers is None:
            handlers = [func for top in self.chain for _, func in self._iter_hooks(top, event)]
            self._handlers[event.name] = handlers
        if not handlers:
            return
        args = event.args()
        for func in handlers:
            try:
                with addonmanager.safecall():
                    result = func(*args)
                    if result is not None and inspect.isawaitable(result):
                        await result
            except exceptions.AddonHalt:
                return


class ProxyEngine:
    """Start with `await start()`, read `port`, stop with `await stop()`.

    One master may carry many loopback listeners (`add_listener`, `remove_listener`): a whole
    `flowproof run` shares one, each flow on listeners of its own. With `port=None` the
    master starts with none. With `upstream_tls=False` (a replay: it dials nothing) the
    master loads no TLS addon, so no certificate authority is generated for it: an RSA key,
    a tenth of a second or more of CPU on every run. A client that speaks TLS to such a
    listener has its connection closed.
    """

    def __init__(
        self,
        addons: Sequence[Any],
        *,
        port: int | None = 0,
        upstream_tls: bool = True,
        on_problem: Problem | None = None,
    ) -> None:
        # Always last: a request nothing answered is refused, never sent to the placeholder.
        self._addons = list(addons)
        if not any(isinstance(addon, Backstop) for addon in self._addons):
            self._addons.append(Backstop())
        self._requested_port = port
        self._upstream_tls = upstream_tls
        self._master: master.Master | None = None
        self._task: asyncio.Task[None] | None = None
        self._confdir = held_temp_folder("flowproof-mitm-")  # goes even if flowproof is killed
        self._servers: dict[int, asyncio.Server] = {}  # bound port -> its listener
        problem = on_problem or (lambda port, message: None)
        self._cap = ConnectionCap(problem)  # connections one listener may hold at once
        self._accepts = AcceptWatch(problem)  # out of descriptors on accept: the flow fails
        self.port: int = 0

    @property
    def master(self) -> master.Master:
        if self._master is None:
            raise ConfigError("the proxy is not running")
        return self._master

    async def start(self) -> int:
        logging.getLogger("mitmproxy").setLevel(logging.WARNING)
        opts = options.Options()
        started = _Started()
        self._master = master.Master(opts, event_loop=asyncio.get_running_loop())
        self._master.addons = _CachedDispatch(self._master)
        tls_addon = tlsconfig.TlsConfig() if self._upstream_tls else _TlsRefused()
        self._master.addons.add(
            core.Core(),
            disable_h2c.DisableH2C(),
            proxyserver.Proxyserver(),
            next_layer.NextLayer(),
            tls_addon,
            started,
            *self._addons,
        )
        opts.update(mode=[], connection_strategy="lazy", confdir=self._confdir)
        loop_errors.install()
        self._accepts.install(asyncio.get_running_loop())  # outside mitmproxy's run
        self._task = asyncio.create_task(self._master.run())
        running = asyncio.create_task(started.event.wait())
        done, _ = await asyncio.wait(
            [running, self._task], timeout=_START_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        if running not in done:
            running.cancel()
            await self.stop()
            raise ConfigError("the proxy engine did not start within 10 s")
        self._accepts.install(asyncio.get_running_loop())  # over mitmproxy's, while it runs
        if self._requested_port is not None:
            try:
                self.port = await self.add_listener(self._requested_port)
            except BaseException:
                await self.stop()
                raise
        return self.port

    async def add_listener(self, port: int = 0) -> int:
        """One more loopback listener on this master; its bound port."""
        sock = bind_loopback(port)
        await self.serve(sock)
        return port_of(sock)

    async def serve(self, sock: socket.socket) -> None:
        """Accept on a listening socket bound beforehand (`listeners.bind_loopback`), which
        this host then owns: a listener of mitmproxy's reverse mode, never dialling its
        placeholder target, outside mitmproxy's `mode` option (that refuses two modes on
        one address, and `127.0.0.1:0` twice is one)."""
        proxyserver_addon = self.master.addons.get("proxyserver")
        port = port_of(sock)
        mode = mode_specs.ProxyMode.parse(f"reverse:{_PLACEHOLDER_TARGET}@{port}")
        instance: Any = mode_servers.ServerInstance.make(mode, proxyserver_addon)
        try:
            server = await asyncio.start_server(
                self._cap.wrap(port, instance.handle_stream),
                sock=sock,
                backlog=BACKLOG,  # asyncio listens again, with its own 100 unless told
                start_serving=False,
            )
        except OSError as exc:
            sock.close()
            raise ConfigError(f"the proxy could not accept on port {port}: {exc}") from None
        # Known before it serves: a flow cancelled right here still closes it through the
        # loop (a socket closed behind the loop's back leaves a stale selector entry).
        self._servers[port] = server
        await server.start_serving()

    def listen_addrs(self) -> list[tuple[str, int]]:
        """(host, port) of every listening socket, as the kernel bound them."""
        return [
            sock.getsockname()[:2] for server in self._servers.values() for sock in server.sockets
        ]

    async def remove_listener(self, port: int) -> None:
        """Close one listener (its socket is gone when this returns); the others stay."""
        server = self._servers.pop(port, None)
        if server is None or self._master is None:
            return
        server.close()
        await _close_client_connections(self._master.addons.get("proxyserver"), port)
        self._cap.forget(port)
        self._accepts.forget(port)

    async def stop(self) -> None:
        if self._master is not None:
            # Close the listening sockets now: shutdown() alone leaves them accepting until
            # the event loop closes, and no flow may leave a listening port behind.
            for listening in self._servers.values():
                listening.close()
            self._servers.clear()
            await _close_client_connections(self._master.addons.get("proxyserver"))
            self._master.shutdown()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=5)
        self._master = None
        self._task = None
        remove_held_folder(self._confdir)

    async def __aenter__(self) -> ProxyEngine:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
