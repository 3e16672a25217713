"""Replay over streamable HTTP: answer from the lane, zero network.

A call's answer is one JSON body, or SSE when server messages come before it; it is
streamed over time when it must wait (for the agent to answer a server-initiated request,
or for other calls). The session id is a constant. The GET stream is served by flowproof
(a second concurrent one gets 409; `Last-Event-ID` resumes a stream, see
`replay_streams`). DELETE is acknowledged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowproof_cli.faults.plan import Fault
from flowproof_cli.mcp.canonical import Kind, kind_of
from flowproof_cli.mcp.http import (
    Drop,
    HttpMcpSession,
    Outcome,
    Reply,
    StreamReply,
    accepts_sse,
    header,
    json_reply,
    refusal_reply,
)
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.mcp.replay_streams import ReplayStreams
from flowproof_cli.mcp.replayer import Emission, Replayer
from flowproof_cli.mcp.sse import Channel, frame
from flowproof_cli.mode import Mode

REPLAY_SESSION_ID = "flowproof-replay"
SESSION_HEADER = "mcp-session-id"
LAST_EVENT_ID_HEADER = "last-event-id"
SSE_HEADERS = {"content-type": "text/event-stream"}


class HttpReplaySession(HttpMcpSession):
    mode = Mode.REPLAY

    def __init__(
        self,
        server: str,
        *,
        lane: Lane | None = None,
        mocks: Mapping[str, Any] | None = None,
        faults: tuple[Fault, ...] = (),
    ):
        super().__init__(server, mocks)
        self.replayer = Replayer(server, lane or Lane(), self.mocks, faults)
        self.streams = ReplayStreams(self.replayer)

    @property
    def negotiated(self) -> str | None:
        return self.replayer.negotiated

    # -- what the agent sent -------------------------------------------------------------

    def _get(self, headers: Mapping[str, str]) -> Outcome:
        last = header(headers, LAST_EVENT_ID_HEADER).strip()
        if last and self.streams.resumable:
            return self._resume(last)
        channel = self.streams.open_standalone()
        if channel is None:
            return refusal_reply(409, "the standalone stream is already open")
        return StreamReply(channel)

    def _resume(self, last: str) -> Outcome:
        resumed = self.streams.resume(last)
        if resumed is None:
            return refusal_reply(
                400, f"Last-Event-ID {last!r} names no event this replay sent; open a new stream"
            )
        if isinstance(resumed, bytes):
            return Reply(200, resumed, dict(SSE_HEADERS))
        return StreamReply(resumed)

    def _delete(self) -> Outcome:
        return Reply(200)

    def _batch(self, batch: list[Any]) -> Outcome:
        finals: list[dict[str, Any]] = []
        for element in batch:
            here = None
            emissions = self.replayer.receive(element)
            if kind_of(element) is Kind.REQUEST:
                here = self.replayer.last_position
            finals.extend(e.message for e in self.streams.route(emissions, here) if e.final)
        return json_reply(200, finals) if finals else Reply(202)

    def _message(self, message: dict[str, Any], headers: Mapping[str, str]) -> Outcome:
        emissions = self.replayer.receive(message)
        if kind_of(message) is not Kind.REQUEST:
            self.streams.route(emissions, None)
            return Reply(202)
        here = self.replayer.last_position
        if any(e.crash for e in emissions):
            return Drop()  # a crash fault: no answer, the connection closes
        mine = self.streams.route(emissions, here)
        final = next((e for e in mine if e.final), None)
        extra = {SESSION_HEADER: REPLAY_SESSION_ID} if message.get("method") == "initialize" else {}
        if final is not None:
            before = [e.message for e in mine if not e.final]
            return self._answer(before, final, headers, extra, here)
        assert here is not None and here >= 0  # only a positioned call's answer can wait
        channel = Channel(headers=extra)
        return StreamReply(self.streams.open_call(here, [e.message for e in mine], channel))

    def _answer(
        self,
        before: list[dict[str, Any]],
        final: Emission,
        headers: Mapping[str, str],
        extra: Mapping[str, str],
        position: int | None,
    ) -> Reply:
        """An answer sent at once: JSON, or SSE when server messages go before it."""
        if not before or not accepts_sse(headers):
            return json_reply(final.status or 200, final.message, extra)
        messages = [*before, final.message]
        if position is None or position < 0:
            body = b"".join(frame(message) for message in messages)
        else:
            body = self.streams.whole_call(position, messages)
        return Reply(200, body, {**SSE_HEADERS, **extra})

    # -- what the runner reads -----------------------------------------------------------

    def lane(self) -> Lane:
        return self.replayer.lane

    def calls(self) -> int:
        return len(self.replayer.arrived)

    @property
    def divergence(self) -> str | None:
        return self.replayer.divergence

    @property
    def applied(self) -> dict[str, int]:
        return self.replayer.applied

    def failures(self) -> list[str]:
        return self.replayer.failures()

    def close(self) -> None:
        self.streams.close()
