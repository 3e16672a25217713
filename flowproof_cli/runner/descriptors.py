"""File descriptors: what one listener may hold of them, and running out of them named.

Every connection an agent holds open to its proxy listener costs flowproof a descriptor, and
all flows of a run share the process's limit (`ulimit -n`). Unbounded, one agent holding a
thousand idle connections takes them all: the flows beside it cannot be accepted, and fail
only at their own timeout with a message that names neither. So:

- each listener serves at most `connection_cap()` connections at once (a quarter of the
  limit, at most `MAX_CONNECTIONS`); one more is closed as soon as it is accepted, and the
  flow of that listener fails naming the cap (`ConnectionCap`);
- `EMFILE`/`ENFILE` on accept (Python's accept loop reports it to the event loop's exception
  handler, and retries a second later) fails the flow of that listener naming the limit
  (`AcceptWatch`), and the same errors elsewhere are worded by `out_of_descriptors`.
"""

from __future__ import annotations

import asyncio
import errno
import resource
from collections.abc import Awaitable, Callable
from typing import Any

#: Connections one listener may hold at once, when the descriptor limit allows this many.
MAX_CONNECTIONS = 512
MIN_CONNECTIONS = 16
FIX = "Fix: raise the limit (`ulimit -n 4096` before flowproof) or run fewer flows at once (-j)"
#: What Python's selector loop says when accept() fails for want of a resource.
_ACCEPT_FAILED = "socket.accept() out of system resource"
#: A retry Python scheduled for a listener that was closed meanwhile: harmless.
_RETRY_OF_CLOSED = "BaseSelectorEventLoop._start_serving"

Problem = Callable[[int, str], None]  # (listening port, message): the flow of that port fails
Handler = Callable[[Any, Any], Awaitable[None]]


def descriptor_limit() -> int | None:
    """The process's soft limit on open descriptors; None when there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def connection_cap(limit: int | None = None) -> int:
    """How many connections one listener may hold: a quarter of the descriptor limit (so
    one agent leaves room for the flows beside it), between MIN_ and MAX_CONNECTIONS."""
    limit = descriptor_limit() if limit is None else limit
    if limit is None:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, limit // 4))


def out_of_descriptors(exc: BaseException) -> str | None:
    """What running out of descriptors is called, when `exc` is that; else None."""
    if not isinstance(exc, OSError):
        return None
    if exc.errno == errno.EMFILE:
        limit = descriptor_limit()
        shown = "none" if limit is None else str(limit)
        return f"flowproof ran out of file descriptors (limit {shown}, `ulimit -n`)"
    if exc.errno == errno.ENFILE:
        return "the system ran out of file descriptors (its limit for all processes)"
    return None


class ConnectionCap:
    """Counts each listener's open connections; one over the cap is closed at once and
    reported, once per listener."""

    def __init__(self, on_problem: Problem, cap: int | None = None) -> None:
        self.cap = connection_cap() if cap is None else cap
        self._on_problem = on_problem
        self._open: dict[int, int] = {}
        self._reported: set[int] = set()

    def wrap(self, port: int, handler: Handler) -> Handler:
        """`handler` for connections on `port`, under the cap."""

        async def capped(reader: Any, writer: Any) -> None:
            if self._open.get(port, 0) >= self.cap:
                writer.transport.abort()
                self._over(port)
                return
            self._open[port] = self._open.get(port, 0) + 1
            try:
                await handler(reader, writer)
            finally:
                self._open[port] -= 1

        return capped

    def forget(self, port: int) -> None:
        """The listener closed: its counts go (the port may serve another flow later)."""
        self._open.pop(port, None)
        self._reported.discard(port)

    def _over(self, port: int) -> None:
        if port in self._reported:
            return
        self._reported.add(port)
        limit = descriptor_limit()
        why = (
            f"a quarter of `ulimit -n` {limit}, at most {MAX_CONNECTIONS}"
            if limit is not None and limit // 4 < MAX_CONNECTIONS
            else f"at most {MAX_CONNECTIONS}"
        )
        message = (
            f"the agent held {self.cap} connections open to flowproof's proxy on "
            f"127.0.0.1:{port} at once, the limit of one listener ({why}); every connection "
            "over it was closed unanswered. Fix: reuse connections (a client's connection "
            "pool) and close the ones the agent no longer needs"
        )
        self._on_problem(port, message)


class AcceptWatch:
    """The event loop's exception handler while the proxy runs: a listener that cannot
    accept for want of descriptors fails its flow, named; Python's retries of a listener
    closed since are dropped; everything else goes to the handler it wraps."""

    def __init__(self, on_problem: Problem) -> None:
        self._on_problem = on_problem
        self._reported: set[int] = set()

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wrap the loop's current handler (mitmproxy sets its own while it runs)."""
        current = loop.get_exception_handler()
        if not (isinstance(current, _Wrapped) and current.watch is self):
            loop.set_exception_handler(_Wrapped(self, current))

    def forget(self, port: int) -> None:
        self._reported.discard(port)

    def handled(self, context: dict[str, Any]) -> bool:
        """Whether `context` was one of ours: reported to its flow, or harmless."""
        message = str(context.get("message", ""))
        exception = context.get("exception")
        if message.startswith("Exception in callback") and _RETRY_OF_CLOSED in message:
            return isinstance(exception, ValueError)  # the fd of a closed listener: -1
        if message != _ACCEPT_FAILED or exception is None:
            return False
        said = out_of_descriptors(exception)
        port = _port_of(context.get("socket"))
        if said is None or port is None:
            return False
        if port not in self._reported:
            self._reported.add(port)
            message = (
                f"{said} and could not accept the agent's connection on 127.0.0.1:{port} (it "
                f"waited in the listener's queue for a descriptor to be free). {FIX}"
            )
            self._on_problem(port, message)
        return True


class _Wrapped:
    """A loop exception handler: the watch first, then the handler it wraps."""

    def __init__(self, watch: AcceptWatch, previous: Any) -> None:
        self.watch = watch
        self.previous = previous

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if self.watch.handled(context):
            return
        if self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)


def _port_of(sock: Any) -> int | None:
    try:
        return int(sock.getsockname()[1])
    except (AttributeError, OSError, TypeError, IndexError, ValueError):
        return None
