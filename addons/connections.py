"""Ending a connection mitmproxy holds, from outside the task that reads it.

mitmproxy's connection handler runs one reader task per connection; cancelling it is how a
connection ends as if its peer had gone (mitmproxy then closes it and reports the flow). The
proxy engine ends its clients so, at shutdown; a WebSocket reset and a crashed request do
too, a missed deadline its server connection. One lookup, so none of them drifts from
mitmproxy's internals alone.
"""

from __future__ import annotations

from typing import Any


def cancel_reader(handler: Any, conn: Any) -> None:
    """Cancel the task reading `conn` of `handler` (a mitmproxy `ConnectionHandler`); a
    connection with no live reader (never opened, already gone) is left alone."""
    io = handler.transports.get(conn)
    if io is not None and io.handler is not None:
        io.handler.cancel()


def cancel_client_reader(handler: Any) -> None:
    """Cancel the task reading `handler`'s client connection: the agent's end closes."""
    cancel_reader(handler, handler.client)
