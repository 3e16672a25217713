"""The streamable-HTTP MCP boundary: one listener per declared server, one lane each.

Thin glue between mitmproxy and `flowproof_cli.mcp.http.HttpMcpSession` (a record or a
replay session), which holds the logic: what a request is, and at record what the real
server's answer means (`mcp.http_upstream`), SSE and refusals included. The addon keeps
mitmproxy's hooks, the flows' metadata, the streaming switches and the deadlines.

Under `flowproof run`/`record` the runner hands this addon one session per listening port;
any path containing `/mcp` on that port is the server's endpoint. Loaded into stock
mitmdump/mitmweb with `-s`, it builds one session from options and serves every port:

    mitmdump -s addons/mcp_http.py --mode reverse:http://127.0.0.1:9@127.0.0.1:8931 \
        --set connection_strategy=lazy --set flowproof_mcp_trace=x.trace.yaml \
        --set flowproof_mcp_server=files

With `flowproof_mcp_mode=record` it forwards to `flowproof_mcp_url` and writes the lane
into the trace on exit. Answers that must go out over time at replay are rerouted to a
loopback stream server this addon owns (an addon's own response is sent whole).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mitmproxy import ctx, exceptions, http

from flowproof_addons import deadline, guard
from flowproof_addons.conversation import ConversationViews
from flowproof_addons.guard import Backstop, Refusal, RequestGuard, mark_forwarded, request_body
from flowproof_cli import trace as traces
from flowproof_cli.cassette.upstream import upstream_timeout
from flowproof_cli.errors import FlowproofError
from flowproof_cli.mcp.call_bound import CallBound
from flowproof_cli.mcp.http import Drop, ForwardRequest, HttpMcpSession, Reply, StreamReply
from flowproof_cli.mcp.http_record import HttpRecordSession
from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.http_upstream import ForwardingSession
from flowproof_cli.mcp.sse import STREAM_PATH, StreamServer
from flowproof_cli.mode import Mode
from flowproof_cli.routes import CLAIMED, is_mcp_path

log = logging.getLogger(__name__)

FORWARDED = "flowproof_mcp_forward"  # metadata: the ForwardRequest of a recorded flow
STREAMED = "flowproof_mcp_stream"  # metadata: rerouted to the loopback stream server
_DROPPED_HEADERS = ("host", "accept-encoding")


def _reply(flow: http.HTTPFlow, reply: Reply) -> None:
    flow.response = http.Response.make(reply.status, reply.body, reply.headers)


class McpHttpBoundary:
    def __init__(self, sessions: dict[int, HttpMcpSession] | None = None):
        self.sessions: dict[int, HttpMcpSession] = dict(sessions or {})
        self.default: HttpMcpSession | None = None
        self.streams = StreamServer()
        self._trace_path: Path | None = None

    # -- stock mitmproxy use ------------------------------------------------------------

    def load(self, loader: Any) -> None:
        loader.add_option(
            "flowproof_mcp_trace", str, "", "Trace to replay the MCP lane from, or to write."
        )
        loader.add_option("flowproof_mcp_server", str, "mcp", "The MCP server's name (lane).")
        loader.add_option(
            "flowproof_mcp_mode",
            str,
            Mode.REPLAY.value,
            "replay: answer from the lane; record: forward to flowproof_mcp_url, keep the lane.",
            choices=[mode.value for mode in Mode],
        )
        loader.add_option("flowproof_mcp_url", str, "", "Record only: the real server's URL.")

    def configure(self, updated: set[str]) -> None:
        options = {"flowproof_mcp_trace", "flowproof_mcp_server", "flowproof_mcp_mode"}
        if not (options | {"flowproof_mcp_url"}) & updated or not ctx.options.flowproof_mcp_trace:
            return
        self._trace_path = Path(ctx.options.flowproof_mcp_trace)
        if ctx.options.flowproof_mcp_mode not in Mode:  # mitmproxy checks no choices on --set
            raise exceptions.OptionsError(
                f"flowproof_mcp_mode is {ctx.options.flowproof_mcp_mode!r}: use replay or record"
            )
        name, mode = ctx.options.flowproof_mcp_server, Mode(ctx.options.flowproof_mcp_mode)
        try:
            if mode is Mode.RECORD:
                if not ctx.options.flowproof_mcp_url:
                    raise ValueError("record needs flowproof_mcp_url (the real server)")
                bound = CallBound(upstream_timeout(os.environ))
                self.default = HttpRecordSession(
                    name, url=ctx.options.flowproof_mcp_url, bound=bound
                )
            else:
                trace = traces.load(self._trace_path)
                if name not in trace.mcp:
                    raise ValueError(f"{self._trace_path} has no lane for the MCP server '{name}'")
                self.default = HttpReplaySession(name, lane=trace.mcp[name])
        except (FlowproofError, OSError, ValueError) as exc:  # a bad trace, lane or option
            raise exceptions.OptionsError(str(exc)) from None

    async def done(self) -> None:
        for session in [*self.sessions.values(), self.default]:
            if session is not None:
                session.close()
        await self.streams.stop()
        session = self.default
        if not isinstance(session, HttpRecordSession) or self._trace_path is None:
            return
        if session.errors:  # a lane missing what was refused would replay as a lie
            log.error("flowproof: the MCP lane was not written: %s", session.errors[0])
            return
        if self._trace_path.exists():
            trace = traces.load(self._trace_path)
        else:
            trace = traces.Trace(flow=self._trace_path.name)
        trace.mcp[session.server] = session.lane()
        traces.save(self._trace_path, trace)
        log.info("flowproof: wrote the MCP lane '%s' to %s", session.server, self._trace_path)

    # -- the hooks ----------------------------------------------------------------------

    def _session_for(self, flow: http.HTTPFlow) -> HttpMcpSession | None:
        sockname = flow.client_conn.sockname
        port = sockname[1] if sockname else None
        return self.sessions.get(port, self.default) if port is not None else self.default

    def _recorder_for(self, flow: http.HTTPFlow) -> ForwardingSession | None:
        """The record session whose real server answers a forwarded request."""
        session = self._session_for(flow)
        return session if isinstance(session, ForwardingSession) else None

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is None and is_mcp_path(flow.request.path) and self._session_for(flow):
            flow.metadata[CLAIMED] = True

    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or not flow.metadata.get(CLAIMED):
            return
        session = self._session_for(flow)
        if session is None:
            return
        try:
            await self._answer(flow, session)
        except Exception as exc:  # fail closed: answered, counted, never forwarded
            flow.metadata.pop(FORWARDED, None)
            flow.metadata.pop(guard.FORWARDED, None)
            flow.metadata.pop(STREAMED, None)
            _reply(flow, session.on_exception(flow.request.path.split("?", 1)[0], exc))

    async def _answer(self, flow: http.HTTPFlow, session: HttpMcpSession) -> None:
        request = flow.request
        body = request_body(request)
        if isinstance(body, Refusal):
            _reply(flow, session.on_refused(body.text, body.status))
            return
        outcome = session.on_request(
            request.method, dict(request.headers), body, request.path.split("?", 1)[0]
        )
        if isinstance(outcome, Reply):
            _reply(flow, outcome)
            flow.comment = f"flowproof: MCP '{session.server}' answered by flowproof"
        elif isinstance(outcome, ForwardRequest):
            self._forward(flow, outcome)
            if isinstance(session, ForwardingSession):
                deadline.arm(flow, session.bound.seconds)  # until its headers
        elif isinstance(outcome, Drop):
            mark_forwarded(flow)  # unanswered on purpose: no refusal, no failure for it
            flow.kill()  # a crash fault: the connection closes with no answer
            flow.comment = f"flowproof: MCP '{session.server}' dropped (a crash fault)"
        elif isinstance(outcome, StreamReply):
            port = await self.streams.ensure_started()
            key = self.streams.register(outcome.channel)
            request.method = "GET"
            request.url = f"http://127.0.0.1:{port}{STREAM_PATH}{key}"
            request.content = b""
            flow.metadata[STREAMED] = True
            mark_forwarded(flow)
            flow.comment = f"flowproof: MCP '{session.server}' streamed from the lane"

    def flowproof_refused(self, flow: http.HTTPFlow, message: str) -> None:
        """The backstop refused a request on a listener of this boundary: its flow fails."""
        if (session := self._session_for(flow)) is not None:
            session.fail(message)

    @staticmethod
    def _forward(flow: http.HTTPFlow, forward: ForwardRequest) -> None:
        request = flow.request
        for name in _DROPPED_HEADERS:
            request.headers.pop(name, None)
        request.url = forward.url
        request.host_header = urlsplit(forward.url).netloc
        flow.metadata[FORWARDED] = forward
        mark_forwarded(flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        if response is None:
            return
        if flow.metadata.get(STREAMED):
            response.stream = True
            return
        forward: ForwardRequest | None = flow.metadata.get(FORWARDED)
        session = self._recorder_for(flow)
        if forward is None or session is None:
            return
        content_type = response.headers.get("content-type")
        answer = session.on_response_headers(forward, response.status_code, content_type)
        if answer is None:
            return  # a whole answer: `response` hands it on
        deadline.stop(flow)  # the answer began: a standalone stream may idle for long
        idle_s = answer.idle_s
        if idle_s is not None:
            deadline.rearm(flow, idle_s)

        def tee(chunk: bytes) -> bytes:
            if idle_s is not None and chunk:
                deadline.rearm(flow, idle_s)
            elif idle_s is not None:
                deadline.stop(flow)  # the stream ended
            answer.on_chunk(chunk)
            return chunk

        response.stream = tee

    def response(self, flow: http.HTTPFlow) -> None:
        forward: ForwardRequest | None = flow.metadata.get(FORWARDED)
        waited = deadline.disarm(flow) if forward is not None else None
        session = self._recorder_for(flow)
        if waited is not None and session is not None and forward is not None:
            # Cut at the call's bound inside an SSE answer read to the connection's close:
            # to mitmproxy that close ended the body, so no error hook follows.
            session.on_upstream_timeout(forward.via)
            return
        response = flow.response
        if forward is None or session is None or response is None or response.stream:
            return
        reply = session.on_response(
            forward,
            flow.request.method,
            response.status_code,
            response.headers.get("content-type"),
            response.get_content(strict=False) or b"",
        )
        if reply is not None:
            _reply(flow, reply)

    def error(self, flow: http.HTTPFlow) -> None:
        forward: ForwardRequest | None = flow.metadata.get(FORWARDED)
        session = self._recorder_for(flow)
        if forward is None or session is None:
            return
        waited = deadline.disarm(flow)  # only a flow this boundary forwarded: not the model's
        if waited is not None:
            session.on_upstream_timeout(forward.via)
            return
        reason = flow.error.msg if flow.error else "connection failed"
        gone = reason == "Client disconnected."  # mitmproxy's word for the agent's close
        session.on_upstream_error(
            forward, reason, agent_gone=gone, answered=flow.response is not None
        )


# Stock mitmdump/mitmweb: the guard first, so only MCP paths are answered; the
# conversation view shows each JSON-RPC message by method and tool; the backstop last, so
# nothing unanswered goes on to the reverse target. Each named for this script, so
# `-s model.py -s mcp_http.py` loads both.
addons = [
    RequestGuard("requestguard@mcp"),
    McpHttpBoundary(),
    ConversationViews("conversationviews@mcp"),
    Backstop("backstop@mcp"),
]
