"""Server-sent events: an incremental parser, the framing, and the loopback stream server.

The stream server exists because a mitmproxy addon's own response is sent whole: an MCP
answer that must go out over time (the standalone GET stream, a `subscriptions/listen`
stream, a POST answer that waits for the agent to answer a server-initiated request) is
rerouted by the addon to this server, which writes it as the replay reaches each point.
It binds 127.0.0.1 only and serves only channels the addon registered, by unguessable key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from flowproof_cli.dialects.sse import named_event

log = logging.getLogger(__name__)

STREAM_PATH = "/flowproof-stream/"


@dataclass
class SseEvent:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SseParser:
    """Feed bytes as they arrive; whole events come out (LF, CRLF and CR line ends)."""

    def __init__(self) -> None:
        self._buffer = ""
        self._pending = b""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        data = self._pending + chunk
        try:
            text = data.decode("utf-8")
            self._pending = b""
        except UnicodeDecodeError as exc:  # a multi-byte character split across chunks
            text = data[: exc.start].decode("utf-8")
            self._pending = data[exc.start :]
        self._buffer += text
        events: list[SseEvent] = []
        while True:
            positions = [p for p in (self._buffer.find("\n"), self._buffer.find("\r")) if p >= 0]
            if not positions:
                break
            end = min(positions)
            if self._buffer[end] == "\r":
                if end + 1 == len(self._buffer):
                    break  # wait: this CR may be the first half of a CRLF
                skip = 2 if self._buffer[end + 1] == "\n" else 1
            else:
                skip = 1
            line, self._buffer = self._buffer[:end], self._buffer[end + skip :]
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[SseEvent]:
        """The stream ended: a last event without its blank line still counts."""
        events = self.feed(b"\n") if self._buffer else []
        event = self._line("")
        return [*events, event] if event is not None else events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if not self._data and self._id is None:
                self._event = ""
                return None
            event = SseEvent("\n".join(self._data), self._event or "message", self._id, self._retry)
            self._data, self._event, self._id, self._retry = [], "", None, None
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None


def frame(message: Any, event_id: str | None = None) -> bytes:
    """One JSON-RPC message as an SSE `message` event."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return (head + named_event("message", message)).encode()


@dataclass
class Channel:
    """One SSE answer going out over time. Closed by its producer, or by the agent leaving."""

    headers: dict[str, str] = field(default_factory=dict)
    closed: bool = False  # no more writes will be delivered
    _queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)

    def put(self, data: bytes) -> None:
        if not self.closed:
            self._queue.put_nowait(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)

    async def get(self) -> bytes | None:
        return await self._queue.get()


class StreamServer:
    """A loopback HTTP/1.1 server writing registered channels as chunked SSE."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._channels: dict[str, Channel] = {}
        self._lock = asyncio.Lock()
        self.port = 0

    async def ensure_started(self) -> int:
        async with self._lock:
            if self._server is None:
                self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
                self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def register(self, channel: Channel) -> str:
        key = secrets.token_hex(16)
        self._channels[key] = channel
        return key

    async def stop(self) -> None:
        for channel in list(self._channels.values()):
            channel.close()
        self._channels.clear()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=2)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode("latin-1")
            key = target.removeprefix(STREAM_PATH) if target.startswith(STREAM_PATH) else ""
            channel = self._channels.pop(key, None)
            if channel is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                return
            await self._stream(channel, reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError):
            pass
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _stream(
        channel: Channel, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
        headers.update(channel.headers)
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        writer.write(f"HTTP/1.1 200 OK\r\n{lines}transfer-encoding: chunked\r\n\r\n".encode())
        await writer.drain()
        gone = asyncio.ensure_future(reader.read())  # the agent (via the proxy) hung up
        try:
            while True:
                item = asyncio.ensure_future(channel.get())
                done, _ = await asyncio.wait({item, gone}, return_when=asyncio.FIRST_COMPLETED)
                if item not in done:
                    item.cancel()
                    break
                data = item.result()
                if data is None:
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                    break
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
        finally:
            channel.closed = True
            gone.cancel()
