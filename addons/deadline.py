"""A forwarded request's deadline: mitmproxy waits for a silent server for ever.

Both boundaries forward at record (the model addon to the upstream model, the MCP addon to
a `url:` server). Each arms a timer when it forwards and disarms it when the answer comes;
a timer that fires cuts the server connection, mitmproxy reports the flow's error, and the
addon's error hook asks `disarm` how long it waited, to say why. An answer streamed in
parts (an MCP call answered over SSE) `rearm`s the wait with each part.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mitmproxy import ctx, http

from flowproof_addons.connections import cancel_reader

# Armed timers, by flow id, and the wait of each flow whose timer fired.
_ARMED: dict[str, asyncio.TimerHandle] = {}
_EXPIRED: dict[str, float] = {}


def arm(flow: http.HTTPFlow, seconds: float) -> None:
    """After `seconds` without `disarm`, the flow's server connection is cut."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a hook called outside the proxy's event loop
        return
    _ARMED[flow.id] = loop.call_later(seconds, _expire, flow, seconds)


def rearm(flow: http.HTTPFlow, seconds: float) -> None:
    """Start the flow's wait over (an answer that arrives in parts: each part resets it);
    never after its timer fired, whose wait `disarm` still reports."""
    stop(flow)
    if flow.id not in _EXPIRED:
        arm(flow, seconds)


def stop(flow: http.HTTPFlow) -> None:
    """Stop the flow's timer, keeping the wait of one that fired for `disarm`."""
    timer = _ARMED.pop(flow.id, None)
    if timer is not None:
        timer.cancel()


def disarm(flow: http.HTTPFlow) -> float | None:
    """Stop the flow's timer; the seconds it waited when it had fired."""
    stop(flow)
    return _EXPIRED.pop(flow.id, None)


def _expire(flow: http.HTTPFlow, seconds: float) -> None:
    _ARMED.pop(flow.id, None)
    _EXPIRED[flow.id] = seconds
    proxyserver: Any = ctx.master.addons.get("proxyserver")
    handler = proxyserver.connections.get(flow.client_conn.id) if proxyserver else None
    if handler is not None:
        cancel_reader(handler, flow.server_conn)  # mitmproxy then reports the flow's error
