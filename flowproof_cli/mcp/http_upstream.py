"""Record over streamable HTTP, the real server's side: what its answers mean for the lane.

`addons/mcp_http.py` forwards what `http_record.HttpRecordSession` tells it to and hands
back, without reading them, what came of it: the answer's headers (`on_response_headers`,
which gives an `SseAnswer` for an SSE answer, fed each chunk as it streams through to the
agent), the whole answer (`on_response`, which may replace it with a refusal), a connection
that failed (`on_upstream_error`) or a call's bound that ran out (`on_upstream_timeout`).
Whatever the server sent, the agent gets its bytes; what is not JSON-RPC, or cannot be
read, fails the record, named here.
"""

from __future__ import annotations

import json
from abc import ABC
from collections.abc import Mapping
from typing import Any

from flowproof_cli.canonical import parse_or
from flowproof_cli.mcp.call_bound import STREAMING_METHODS, CallBound, call_text
from flowproof_cli.mcp.canonical import INTERNAL_ERROR, Kind, kind_of
from flowproof_cli.mcp.http import ForwardRequest, HttpMcpSession, Reply, refusal_reply
from flowproof_cli.mcp.recorder import LaneRecorder, is_json_rpc, quote_line
from flowproof_cli.mcp.sse import SseEvent, SseParser
from flowproof_cli.quoting import failure

SSE_MEDIA = "text/event-stream"
#: What the agent's closing its connection is to the answer it was waiting for.
AGENT_LEFT = "the agent closed its connection before the server answered"


class SseAnswer:
    """One SSE answer of the real server, read as it streams through to the agent."""

    def __init__(self, session: ForwardingSession, forward: ForwardRequest, status: int):
        self._session = session
        self._forward = forward
        self._status = status
        self._parser = SseParser()
        #: The wait between its events (a call's answer that falls silent for its bound
        #: fails the record); None: a stream meant to stay open (the GET stream, a listen).
        self.idle_s = None if forward.standalone else session.wait_for(forward.via)

    def on_chunk(self, chunk: bytes) -> None:
        """Bytes of the answer as they pass (b"": it ended). Never raises: the bytes reach
        the agent whatever they are, and what cannot be read fails the record."""
        try:
            events = self._parser.feed(chunk) if chunk else self._parser.close()
            for event in events:
                if event.event == "message" and event.data:
                    self._session.on_sse_event(event, self._forward, self._status)
        except Exception as exc:
            self._session.fail(f"could not handle the real server's stream ({failure(exc)})")


class ForwardingSession(HttpMcpSession, ABC):
    """A session whose requests go on to a real server at `url`, its answers into a lane."""

    def __init__(
        self,
        server: str,
        *,
        url: str,
        mocks: Mapping[str, Any] | None = None,
        bound: CallBound,
    ):
        super().__init__(server, mocks)
        self.url = url
        #: The wait for each answer (its headers, then between its SSE events): a failure.
        self.bound = bound
        self.recorder = LaneRecorder()
        self._seen_event_ids: set[str] = set()

    # -- the answer to a forwarded request, as the proxy reads it -------------------------

    def on_response_headers(
        self, forward: ForwardRequest, status: int, content_type: str | None
    ) -> SseAnswer | None:
        """The answer began: an SSE answer is read as it streams through (None: a whole
        answer, read at `on_response`)."""
        if SSE_MEDIA not in (content_type or "").lower():
            return None
        return SseAnswer(self, forward, status)

    def on_response(
        self,
        forward: ForwardRequest,
        method: str,
        status: int,
        content_type: str | None,
        content: bytes,
    ) -> Reply | None:
        """A whole (not streamed) answer to a forwarded request, kept in the lane. A Reply:
        what the agent gets instead, as the record could not keep it (None: the server's)."""
        if status == 202 or method != "POST":
            return None
        media = ("no content type" if content_type is None else content_type).split(";")[0]
        try:
            self._keep(forward, status, content, media.strip())
        except Exception as exc:  # an answer record cannot keep is not handed on as kept
            text = f"could not handle the real server's answer ({failure(exc)})"
            self.fail(text)
            return refusal_reply(500, text, forward.via, INTERNAL_ERROR)
        return None

    def on_upstream_error(
        self, forward: ForwardRequest, reason: str, *, agent_gone: bool, answered: bool
    ) -> None:
        """The forwarded request ended without its answer: the server's connection failed
        (`reason`, also a body the server cut), or the agent closed its own (`agent_gone`;
        `answered`: its answer had begun)."""
        if agent_gone:
            if answered:
                return  # the agent closed a stream it had: nothing went wrong
            if self.on_agent_gone(forward.via):
                return  # named by its call: the server had not answered it
            reason = AGENT_LEFT
        self.on_upstream_unreachable(reason)

    def _keep(self, forward: ForwardRequest, status: int, content: bytes, media: str) -> None:
        try:
            message = json.loads(content) if content else None
        except ValueError:
            message = None
        if is_json_rpc(message):
            self.on_upstream_message(message, via=forward.via, status=status)
        elif status >= 400:
            self.on_upstream_failure(forward.via, status, content.decode("utf-8", "replace"))
        elif forward.via is not None:  # a call's answer that answers nothing: record fails
            what = f"answered {self.recorder.label_of(forward.via)} with a body that is not"
            self.errors.append(
                f"the MCP server '{self.server}' {what} JSON-RPC (HTTP {status}, "
                f"{quote_line(media)}): {quote_line(content) or '(empty)'}"
            )

    def on_sse_event(self, event: SseEvent, forward: ForwardRequest, status: int) -> None:
        """One `message` event of an SSE answer: a JSON-RPC message for the lane, or a
        failure of the record (the agent still gets it)."""
        message = parse_or(event.data, None)
        if not is_json_rpc(message):
            where = self.recorder.label_of(forward.via)
            self.errors.append(
                f"the MCP server '{self.server}' sent an SSE event that is not JSON-RPC in its "
                f"answer to {where}: {quote_line(event.data)}"
            )
            return
        self.on_upstream_message(
            message,
            via=forward.via,
            standalone=forward.standalone,
            status=status,
            event_id=event.id,
        )

    # -- what the real server sent -------------------------------------------------------

    def on_upstream_message(
        self,
        message: Any,
        *,
        via: Any = None,
        standalone: bool = False,
        status: int | None = None,
        event_id: str | None = None,
    ) -> None:
        """A message the real server sent (a JSON answer, or one SSE event)."""
        if event_id:
            if event_id in self._seen_event_ids:
                return  # replayed to a resuming agent: already in the lane
            self._seen_event_ids.add(event_id)
        for element in message if isinstance(message, list) else [message]:
            received = element
            if (
                via is not None
                and not isinstance(message, list)
                and kind_of(element) is Kind.RESPONSE
                and element.get("id") is None
            ):
                # A request rejected before its id was read (`"id": null`): it answers `via`.
                received = {**element, "id": via}
            self.recorder.server(received, via=via, stream=standalone, status=status)

    def on_upstream_failure(self, via: Any, status: int, text: str) -> None:
        """A request answered with an HTTP error and no JSON-RPC body: keep it as an error."""
        if via is None:
            return
        error = {"code": INTERNAL_ERROR, "message": f"HTTP {status}: {text[:200]}"}
        self.recorder.server({"jsonrpc": "2.0", "id": via, "error": error}, status=status)

    def wait_for(self, via: Any) -> float | None:
        """Seconds the answer to request `via` may take (None: a stream left open)."""
        position = self.recorder.position_of(via) if via is not None else None
        if position is not None and self.recorder.lane.calls[position].method in STREAMING_METHODS:
            return None
        return self.bound.seconds

    def on_upstream_timeout(self, via: Any) -> None:
        """The real server stayed silent for the bound: the record fails naming the call."""
        position = self.recorder.position_of(via) if via is not None else None
        if position is None:
            what = f"no answer within {self.bound.seconds:g} s ({self.bound.source()})"
            self.on_upstream_unreachable(what)
            return
        call = call_text(self.recorder.lane.calls[position].label(), via)
        self.errors.append(self.bound.server_not_answered(self.server, call))

    def on_agent_gone(self, via: Any) -> bool:
        """The agent closed its connection before the server answered request `via`: the
        record fails naming the call; False when `via` names no waiting call."""
        position = self.recorder.position_of(via) if via is not None else None
        if position is None:
            return False
        call = call_text(self.recorder.lane.calls[position].label(), via)
        self.errors.append(self.bound.unanswered_at_end(self.server, call))
        return True

    def on_upstream_unreachable(self, reason: str) -> None:
        self.errors.append(
            f"flowproof could not reach the real MCP server '{self.server}' at {self.url}: {reason}"
        )
