"""A flow's matcher addons on the run's one master: each sees only its own flow's traffic
(by listening port), and its hooks, user code, run in its script's thread within the budget
(match/user_code.py), never on the event loop every flow shares. Their `load`, `configure`,
`running` and `done` are called by flowproof when the flow joins and leaves, not by
mitmproxy (`runner/run_proxy.py` does the joining).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from flowproof_cli.match.rules import MatcherAddonError
from flowproof_cli.match.user_code import Raised, exception_text

if TYPE_CHECKING:
    from flowproof_cli.match.addons import ScriptAddon

# Hooks that concern the whole master, not one flow's traffic: flowproof calls them itself
# when a flow's addon joins and leaves (`PortScoped.start`, `finish`), never mitmproxy.
_LIFECYCLE_HOOKS = frozenset({"load", "configure", "running", "done"})


def _port_of(value: Any) -> int | None:
    """The listening port a hook argument belongs to (a flow, a connection, its data)."""
    for candidate in (getattr(value, "client_conn", None), getattr(value, "client", None), value):
        sockname = getattr(candidate, "sockname", None)
        if sockname:
            return int(sockname[1])
    return None


class _DeferredLoader:
    """What a joining addon's `load` gets, in place of mitmproxy's `Loader`: its options and
    commands are kept, and added to the master on the event loop once `load` returned
    (`load` runs in its script's thread, and adding an option runs every addon's
    `configure`)."""

    def __init__(self, master: Any) -> None:
        self.master = master
        self.kept: list[tuple[str, tuple[Any, ...]]] = []

    def add_option(self, *args: Any, **kwargs: Any) -> None:
        self.kept.append(("add_option", (*args, *kwargs.values())))

    def add_command(self, path: str, func: Callable[..., Any]) -> None:
        self.kept.append(("add_command", (path, func)))

    def apply(self) -> None:
        from mitmproxy.addonmanager import Loader  # noqa: PLC0415 (loaded with the engine)

        loader = Loader(self.master)
        for method, args in self.kept:
            getattr(loader, method)(*args)


def _in_thread(hook: Callable[..., Any]) -> Callable[..., Any]:
    """A hook as its script's thread runs it: an `async def` one on an event loop of that
    call's own (it cannot await the proxy's loop from there)."""
    if not inspect.iscoroutinefunction(hook):
        return hook
    return lambda *args: asyncio.run(hook(*args))


class PortScoped:
    """A matcher script's addon object, seeing only the traffic of its own flow's ports, its
    hooks run in its script's thread within the budget (match/user_code.py).

    mitmproxy calls every addon for every event; without the scope, one flow's `request`
    hook would also see the requests of the flows running beside it. Without the thread, a
    hook that sleeps or loops would hold the event loop, and every flow with it. A hook
    that fails (raises anything, exits, exceeds its budget) fails this flow (`fail`), and
    the proxy goes on as if it had returned.
    """

    def __init__(
        self, addon: ScriptAddon, ports: set[int], name: str, fail: Callable[[str], None]
    ) -> None:
        self._addon = addon
        self._ports = ports  # live: the flow's MCP listeners join after the model's
        self._fail = fail
        self._pending: set[asyncio.Future[bool]] = set()
        self.name = name  # unique in the master, even for one script in two flows

    def _mine(self, args: Sequence[Any]) -> bool:
        port = _port_of(args[0]) if args else None
        return port is None or port in self._ports

    def __getattr__(self, hook: str) -> Any:
        target = self._addon.hooks.get(hook)
        if target is None or hook.startswith("_") or hook in _LIFECYCLE_HOOKS:
            raise AttributeError(hook)
        if hook == "update":
            return self._scoped_update(target)

        def scoped(*args: Any) -> Awaitable[bool] | None:
            return self._called(hook, target, args) if self._mine(args) else None

        return scoped

    def _scoped_update(self, target: Callable[..., Any]) -> Callable[..., Any]:
        def update(flows: Sequence[Any]) -> Awaitable[bool] | None:
            own = [flow for flow in flows if self._mine([flow])]
            return self._called("update", target, (own,)) if own else None

        return update

    def _called(
        self, hook: str, target: Callable[..., Any], args: Sequence[Any]
    ) -> Awaitable[bool]:
        """The hook, started in the script's thread. mitmproxy awaits it (a synchronous
        `trigger` drops it; it runs all the same), and a connection that closes meanwhile
        stops the waiting, not the call: its failure still fails the flow (`finish`)."""
        call = asyncio.ensure_future(self._call(hook, target, *args))
        self._pending.add(call)
        call.add_done_callback(self._pending.discard)
        return asyncio.shield(call)

    async def _call(self, hook: str, target: Callable[..., Any], *args: Any) -> bool:
        addon = self._addon
        try:
            await addon.calls.run(addon.name, hook, _in_thread(target), *args)
        except MatcherAddonError as exc:
            self._fail(str(exc))
            return False
        return True

    async def start(self, master: Any) -> bool:
        """Its `load`, `configure` (every option) and `running`, as mitmproxy calls them on
        a script joining a running proxy; False (its flow failed) when one failed."""
        hooks = self._addon.hooks
        if "load" in hooks:
            loader = _DeferredLoader(master)
            if not await self._call("load", hooks["load"], loader):
                return False
            try:
                loader.apply()
            except Exception as exc:  # an option mitmproxy refuses: as if `load` raised it
                failure = Raised("load", exc, exception_text(exc))
                self._fail(str(self._addon.calls.worded(failure, self._addon.name, "load")))
                return False
        every_option = set(master.options.keys())
        if "configure" in hooks and not await self._call(
            "configure", hooks["configure"], every_option
        ):
            return False
        return "running" not in hooks or await self._call("running", hooks["running"])

    async def finish(self) -> None:
        """Once it has left the proxy: its hook calls still running are waited for (each
        within its budget), then its `done`."""
        if self._pending:
            await asyncio.wait(set(self._pending))
        if "done" in self._addon.hooks:
            await self._call("done", self._addon.hooks["done"])
