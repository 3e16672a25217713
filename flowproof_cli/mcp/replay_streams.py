"""The SSE streams of one replayed HTTP MCP session, kept whole so that an agent can resume.

Resumption (handshake era only, 2025-03-26 to 2025-11-25): every SSE event flowproof sends
carries the id `<stream>-<n>`, the n-th event (1-based) of that stream, where the stream
is `get` (the standalone GET stream) or `call<N>` (the answer of call N, by lane position):
the same lane and agent give the same ids on every replay. A GET with `Last-Event-ID`
resumes the stream that id names with the events after it, then goes on live; an id
flowproof never sent is refused by the session (the SDK clients give up on it rather than
hang). A message that went to the GET stream because the agent had left its call's stream
is not sent again on the call's resumed stream; the call's answer itself waits for the
resume.

Transport-blind like the replayer: what comes out is bytes or a `Channel`, which the HTTP
session turns into its replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flowproof_cli.mcp.canonical import RESUMABLE_VERSIONS
from flowproof_cli.mcp.replayer import Emission, Replayer
from flowproof_cli.mcp.sse import Channel, frame

#: The stream key of the standalone GET stream (a call's answer stream is `call<N>`).
STANDALONE_KEY = "get"


def stream_key(position: int | None) -> str:
    """The stream an event id names: `get`, or `call<N>` for the answer of call N (1-based)."""
    return STANDALONE_KEY if position is None else f"call{position + 1}"


@dataclass
class Stream:
    """One SSE stream of the replay: every message it carried, and its connection now."""

    key: str
    events: list[dict[str, Any]] = field(default_factory=list)  # every message, in order
    channel: Channel | None = None  # the connection carrying it now
    handed: int = 0  # events put on some connection (the GET stream's backlog: the rest)
    finished: bool = False  # a call's answer is in it: nothing more comes

    @property
    def live(self) -> bool:
        return self.channel is not None and not self.channel.closed

    def event_id(self, number: int) -> str:
        return f"{self.key}-{number}"


class ReplayStreams:
    """The standalone stream and the answer stream of every call that was streamed."""

    def __init__(self, replayer: Replayer):
        self._replayer = replayer
        self._streams: dict[int | None, Stream] = {None: Stream(STANDALONE_KEY)}
        self._negotiated: str | None = None

    @property
    def resumable(self) -> bool:
        """The replayed session negotiated a handshake-era version: events carry ids."""
        if self._negotiated is None:  # known once initialize was answered: kept from then
            self._negotiated = self._replayer.negotiated
        return self._negotiated in RESUMABLE_VERSIONS

    # -- connections ---------------------------------------------------------------------

    def open_standalone(self) -> Channel | None:
        """The GET stream with its backlog; None while another connection carries it."""
        standalone = self._streams[None]
        if standalone.live:
            return None
        return self._connect(standalone, standalone.handed)

    def resume(self, last: str) -> bytes | Channel | None:
        """`Last-Event-ID`: the events of that id's stream after it, then the stream live
        (a finished stream: the rest as one body). None: this replay never sent that id."""
        key, _, number = last.rpartition("-")
        stream = next((s for s in self._streams.values() if s.key == key), None)
        sent = int(number) if number.isascii() and number.isdigit() else 0
        if stream is None or not 1 <= sent <= len(stream.events) or stream.event_id(sent) != last:
            return None
        if stream.channel is not None:
            stream.channel.close()  # the connection the agent lost, if flowproof still has it
        if stream.finished:
            return b"".join(self._frame(stream, n) for n in range(sent, len(stream.events)))
        return self._connect(stream, sent)

    def open_call(self, position: int, messages: list[dict[str, Any]], channel: Channel) -> Channel:
        """The answer stream of call `position`, which must wait: `messages` go first."""
        stream = self._call_stream(position)
        self._connect(stream, 0, channel)
        for message in messages:
            self._send(stream, message)
        return channel

    def whole_call(self, position: int, messages: list[dict[str, Any]]) -> bytes:
        """The answer stream of a call sent at once, kept whole: a resuming agent gets
        what it missed of it."""
        stream = self._call_stream(position)
        stream.events = list(messages)
        stream.handed, stream.finished = len(stream.events), True
        return b"".join(self._frame(stream, n) for n in range(len(stream.events)))

    def close(self) -> None:
        for stream in self._streams.values():
            if stream.channel is not None:
                stream.channel.close()

    # -- routing -------------------------------------------------------------------------

    def route(self, emissions: list[Emission], here: int | None) -> list[Emission]:
        """Emissions for the request at hand come back; the others go to their streams."""
        mine: list[Emission] = []
        for emission in emissions:
            if emission.channel is not None and emission.channel == here:
                mine.append(emission)
            elif not self._deliver(emission):
                # Not resent on the call's stream if the agent resumes it: delivered here.
                self._send(self._streams[None], emission.message)
        return mine

    def _deliver(self, emission: Emission) -> bool:
        """Put an emission on its call's stream; False: it goes to the standalone stream."""
        stream = self._streams.get(emission.channel) if emission.channel is not None else None
        if stream is None or stream.finished:
            return emission.final  # the agent left that answer's stream: nobody to tell
        if stream.live:
            self._send(stream, emission.message)
            if emission.final:
                self._finish(stream)
            return True
        if not emission.final:
            return False
        # The agent left that answer's stream: the answer waits for it to resume
        # (handshake era); nobody is told otherwise.
        if self.resumable:
            self._send(stream, emission.message)
            self._finish(stream)
        return True

    # -- one stream ----------------------------------------------------------------------

    def _call_stream(self, position: int) -> Stream:
        stream = Stream(stream_key(position))
        self._streams[position] = stream
        return stream

    def _connect(self, stream: Stream, start: int, channel: Channel | None = None) -> Channel:
        """A new connection for `stream`, starting with its events from `start` (0-based)."""
        channel = channel if channel is not None else Channel()
        for number in range(start, len(stream.events)):
            channel.put(self._frame(stream, number))
        stream.channel = channel
        stream.handed = len(stream.events)
        return channel

    def _frame(self, stream: Stream, index: int) -> bytes:
        event_id = stream.event_id(index + 1) if self.resumable else None
        return frame(stream.events[index], event_id)

    def _send(self, stream: Stream, message: dict[str, Any]) -> None:
        """Append to the stream, and write it to the stream's connection when it has one."""
        stream.events.append(message)
        if stream.live and stream.channel is not None:
            stream.channel.put(self._frame(stream, len(stream.events) - 1))
            stream.handed = len(stream.events)

    @staticmethod
    def _finish(stream: Stream) -> None:
        stream.finished = True
        if stream.channel is not None:
            stream.channel.close()
