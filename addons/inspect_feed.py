"""The mitmweb side of `flowproof inspect` and `flowproof run --inspect`: flows fed on stdin.

`flowproof` starts mitmweb as a child with this script (`-s addons/inspect_feed.py`) and
writes each flow to the child's stdin in mitmproxy's own flow-file format (one tnetstring
a flow); this addon reads them without blocking mitmweb's event loop and loads each into
the view, in the order written. mitmweb's own `--rfile -` would read stdin synchronously
and freeze the web server until the stream ends. The end of stdin means `flowproof` is
gone (finished, interrupted or killed), so mitmweb shuts down with it: no orphan server.
It also registers the conversation view.
"""

from __future__ import annotations

import asyncio
import io as stdio
import logging
import sys
from typing import Any

from mitmproxy import ctx, exceptions, io

from flowproof_addons.conversation import register

log = logging.getLogger(__name__)


class FlowFeed:
    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def load(self, loader: Any) -> None:
        register()

    def running(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=2**30)
            await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer
            )
            while await self._one(reader):
                pass
        except (OSError, ValueError, exceptions.FlowReadException) as exc:
            log.error("flowproof: the flow feed failed: %s", exc)
        ctx.master.shutdown()

    @staticmethod
    async def _one(reader: asyncio.StreamReader) -> bool:
        """Load one flow; False at the end of the feed."""
        try:
            head = await reader.readuntil(b":")
        except asyncio.IncompleteReadError:
            return False
        frame = head + await reader.readexactly(int(head[:-1]) + 1)
        for flow in io.FlowReader(stdio.BytesIO(frame)).stream():
            await ctx.master.load_flow(flow)
        return True


addons = [FlowFeed()]
