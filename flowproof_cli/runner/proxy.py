"""An in-process mitmproxy master, bound to 127.0.0.1, carrying only flowproof's addons.

Why not DumpMaster: it loads ~30 default addons whose hooks run on every flow; a master with
the five it needs answers faster and starts sooner. Lazy connections matter: with the
default eager strategy mitmproxy dials the (dummy) upstream even for requests an addon
answered, and resets the client when that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import tempfile
from collections.abc import Sequence
from typing import Any

from mitmproxy import master, options
from mitmproxy.addons import core, disable_h2c, next_layer, proxyserver, tlsconfig
from mitmproxy.proxy import mode_specs

from flowproof_cli.errors import ConfigError, PortInUseError

# Never dialled: replay answers everything in the request hook, and record rewrites each
# forwarded request to the configured upstream. A reverse mode still needs a target.
_PLACEHOLDER_TARGET = "http://127.0.0.1:9"
_START_TIMEOUT_S = 10.0
_CLOSE_TIMEOUT_S = 2.0


async def _close_client_connections(server: Any) -> None:
    """End every live client connection so its task finishes rather than being cancelled.

    A long-lived service keeps its HTTP connections to the proxy open (keep-alive). Left
    open, their tasks are cancelled when the event loop closes, and Python 3.12.1's asyncio
    then logs a spurious `Exception in callback ... CancelledError` traceback for each.
    Cancelling the inner connection handler lets mitmproxy close the client cleanly.
    """
    with contextlib.suppress(Exception):
        for handler in list(server.connections.values()):
            io = handler.transports.get(handler.client)
            if io is not None and io.handler is not None:
                io.handler.cancel()
    deadline = asyncio.get_running_loop().time() + _CLOSE_TIMEOUT_S
    while server.connections and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.005)


class ProxyHost:
    """Start with `await start()`, read `port`, stop with `await stop()`."""

    def __init__(self, addons: Sequence[Any], *, port: int = 0):
        self._addons = list(addons)
        self._requested_port = port
        self._master: master.Master | None = None
        self._task: asyncio.Task[None] | None = None
        self._confdir = tempfile.TemporaryDirectory(prefix="flowproof-mitm-")
        self._listeners = 0
        self.port: int = 0

    async def start(self) -> int:
        logging.getLogger("mitmproxy").setLevel(logging.WARNING)
        opts = options.Options()
        self._master = master.Master(opts, event_loop=asyncio.get_running_loop())
        self._master.addons.add(
            core.Core(),
            disable_h2c.DisableH2C(),
            proxyserver.Proxyserver(),
            next_layer.NextLayer(),
            tlsconfig.TlsConfig(),
            *self._addons,
        )
        opts.update(
            mode=[f"reverse:{_PLACEHOLDER_TARGET}@127.0.0.1:{self._requested_port}"],
            connection_strategy="lazy",
            confdir=self._confdir.name,
        )
        self._task = asyncio.create_task(self._master.run())
        server = self._master.addons.get("proxyserver")
        deadline = asyncio.get_running_loop().time() + _START_TIMEOUT_S
        while True:
            addresses = server.listen_addrs()
            if addresses:
                self.port = int(addresses[0][1])
                return self.port
            failure = next((s.last_exception for s in server.servers if s.last_exception), None)
            if failure is not None:
                await self.stop()
                if isinstance(failure, OSError) and failure.errno == errno.EADDRINUSE:
                    raise PortInUseError(self._requested_port)
                raise ConfigError(
                    f"the proxy could not listen on 127.0.0.1:{self._requested_port or 'any'}: "
                    f"{failure}"
                )
            if self._task.done():
                await self.stop()
                raise ConfigError(
                    f"the proxy could not listen on 127.0.0.1:{self._requested_port or 'any'}"
                )
            if asyncio.get_running_loop().time() > deadline:
                await self.stop()
                raise ConfigError("the proxy did not start listening within 10 s")
            await asyncio.sleep(0.005)

    async def add_listener(self, port: int = 0) -> int:
        """One more loopback listener on this master (an MCP server's); its bound port.

        The instance is added to the running servers directly: mitmproxy's `mode` option
        refuses two modes on the same address, and `127.0.0.1:0` twice is that address.
        Each listener gets its own (never dialled) target so the mode specs differ.
        """
        if self._master is None:
            raise ConfigError("the proxy is not running")
        server = self._master.addons.get("proxyserver")
        self._listeners += 1
        target = f"http://127.0.0.1:{10 + self._listeners}"
        mode = mode_specs.ProxyMode.parse(f"reverse:{target}@127.0.0.1:{port}")
        await server.servers.update([*(instance.mode for instance in server.servers), mode])
        instance = server.servers[mode]
        if instance.last_exception is not None or not instance.listen_addrs:
            failure = instance.last_exception
            if isinstance(failure, OSError) and failure.errno == errno.EADDRINUSE:
                raise PortInUseError(port)
            raise ConfigError(f"the proxy could not listen on 127.0.0.1:{port or 'any'}: {failure}")
        return int(instance.listen_addrs[0][1])

    async def stop(self) -> None:
        if self._master is not None:
            # Close the listening sockets now: shutdown() alone leaves them accepting until
            # the event loop closes, and no flow may leave a listening port behind.
            server = self._master.addons.get("proxyserver")
            with contextlib.suppress(Exception):
                await server.servers.update([])
            await _close_client_connections(server)
            self._master.shutdown()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=5)
        self._master = None
        self._task = None
        self._confdir.cleanup()

    async def __aenter__(self) -> ProxyHost:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
