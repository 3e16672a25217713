"""`flowproof_addons.connections`: a mitmproxy connection ends by cancelling its reader task,
and one without a live reader is left alone (the proxy engine's shutdown, a WebSocket
reset, a crashed request and a missed deadline all end connections through it)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from flowproof_addons.connections import cancel_client_reader, cancel_reader


@dataclass
class _Io:
    """mitmproxy's per-connection transport: `handler` is the task reading it."""

    handler: asyncio.Task[None] | None


@dataclass
class _Handler:
    """A `ConnectionHandler` as the function reads it: its client and its transports."""

    client: object = field(default_factory=object)
    transports: dict[Any, _Io] = field(default_factory=dict)


async def _reader() -> asyncio.Task[None]:
    task = asyncio.get_running_loop().create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)  # started, as a live reader is
    return task


@pytest.mark.parametrize("end", ["client", "server"])
def test_only_the_named_connections_reader_is_cancelled(end: str) -> None:
    async def scenario() -> dict[str, bool]:
        server = object()
        handler = _Handler()
        readers = {"client": await _reader(), "server": await _reader()}
        handler.transports = {
            handler.client: _Io(readers["client"]),
            server: _Io(readers["server"]),
        }
        if end == "client":
            cancel_client_reader(handler)
        else:
            cancel_reader(handler, server)
        await asyncio.sleep(0)
        cancelled = {name: task.cancelled() for name, task in readers.items()}
        for task in readers.values():
            task.cancel()
        return cancelled

    assert asyncio.run(scenario()) == {"client": end == "client", "server": end == "server"}


def test_a_missing_transport_or_reader_is_left_alone() -> None:
    async def scenario() -> bool:
        other = await _reader()
        cancel_client_reader(_Handler(transports={object(): _Io(other)}))  # client gone
        handler = _Handler()
        handler.transports = {handler.client: _Io(None)}  # no reader task (yet)
        cancel_client_reader(handler)
        await asyncio.sleep(0)
        untouched = not other.cancelled()
        other.cancel()
        return untouched

    assert asyncio.run(scenario())
