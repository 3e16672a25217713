"""The model boundary: answer model API calls from a cassette, or record them upstream.

Thin glue between mitmproxy and `flowproof_cli.cassette.CassetteSession`, which holds the
logic. Under `flowproof run`/`record` the runner hands this addon one session per listening
port. Loaded into stock mitmdump/mitmweb with `-s`, it builds its own session from options:

    mitmdump -s addons/model.py --mode reverse:http://127.0.0.1:9@127.0.0.1:8080 \
        --set connection_strategy=lazy --set flowproof_trace=x.trace.yaml

With `flowproof_mode=record` it forwards to `flowproof_upstream` (default: the
FLOWPROOF_AGENT_UPSTREAM / OPENAI_BASE_URL of its environment) and writes the trace on exit.

Matcher addons load beside it the mitmproxy way (`-s strip_session.py`): every loaded addon
that defines `flowproof_normalize(request, protocol)` is a match rule, in load order.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mitmproxy import addonmanager, ctx, exceptions, http
from mitmproxy.net.http.status_codes import RESPONSES

from flowproof_addons import deadline
from flowproof_addons import websocket as sockets
from flowproof_addons.conversation import CONVERSATION_TURN, MOCKED_TOOLS, ConversationViews
from flowproof_addons.credentials import drop_agent_credentials
from flowproof_addons.guard import (
    FORWARDED,
    RESET_BY_FAULT,
    Backstop,
    Refusal,
    RequestGuard,
    mark_forwarded,
    request_body,
    routed,
)
from flowproof_cli import trace as traces
from flowproof_cli.cassette import CassetteSession, Forward, Upstream
from flowproof_cli.cassette.session import INTERNAL_KIND, OffLoop
from flowproof_cli.cassette.upstream import CLIENT_GONE_REASON, timeout_reason
from flowproof_cli.cassette.upstreams import Upstreams, upstreams_from_environment
from flowproof_cli.dialects import Dialect, Rendered, route
from flowproof_cli.dialects.websocket import is_upgrade
from flowproof_cli.errors import ConfigError, FlowproofError
from flowproof_cli.faults.model_calls import ModelCalls
from flowproof_cli.match.addons import rules_from_master_addons
from flowproof_cli.match.build import snapshot_rules
from flowproof_cli.match.relocate import Relocation
from flowproof_cli.match.rules import MatcherAddonError, MatchRules, Rule
from flowproof_cli.match.user_code import DEFAULT_BUDGET_S, Budget, addon_budget
from flowproof_cli.mode import Mode
from flowproof_cli.providers import UpstreamSigner, upstream_signers
from flowproof_cli.quoting import could_not_handle

log = logging.getLogger(__name__)

PENDING = "flowproof_pending"
# Headers of the upstream's answer the agent still gets: when to retry, the rate limits.
_KEPT_PREFIXES = ("retry-after", "x-ratelimit-", "anthropic-ratelimit-", "x-amzn-errortype")


def _user_agent(flow: http.HTTPFlow) -> str | None:
    """The agent's User-Agent: the session reads which agent, at which version, sent it."""
    return flow.request.headers.get("user-agent")


def _upstream_failure(flow: http.HTTPFlow, waited: float | None) -> str:
    if waited is not None:
        return timeout_reason(waited)
    reason = flow.error.msg if flow.error else "connection failed"
    return CLIENT_GONE_REASON if reason == "Client disconnected." else reason


def _replay_rules(trace: traces.Trace, path: Path | None, loaded: list[Rule]) -> MatchRules:
    """The rules the trace was recorded with (its `match:`), rebuilt, then the matcher
    addons loaded with -s. Relocation uses this proxy's working directory and HOME, so run
    mitmdump from the checkout the agent runs in."""
    snapshot = snapshot_rules(trace.match, str(path))
    missing = sorted(set(snapshot.addons) - {rule.snapshot().get("addon") for rule in loaded})
    if missing:
        raise ConfigError(
            f"{path} was recorded with matcher addon(s) {', '.join(missing)}. Fix: load "
            "their script(s) with -s, as the flow's `match.addons` does"
        )
    home = os.environ.get("HOME")
    relocation = Relocation(str(Path.cwd()), home or "") if snapshot.relocate else None
    return MatchRules(snapshot.rules + loaded, relocation)


def _stock_budget() -> Budget:
    """Under stock mitmproxy: each matcher addon call's budget, from the environment."""
    try:
        return addon_budget(os.environ)
    except ConfigError as exc:
        log.error("flowproof: %s; using %g s", exc, DEFAULT_BUDGET_S)
        return Budget()


def _deliver(flow: http.HTTPFlow, rendered: Rendered) -> Awaitable[None] | None:
    """`_respond`, or what a fault asks instead: the connection closed without an answer,
    or the answer after a wait (awaited by mitmproxy: the other flows go on meanwhile)."""
    if rendered.reset:
        flow.metadata[RESET_BY_FAULT] = True
        flow.kill()
        return None
    if rendered.delay_s > 0:
        return _respond_later(flow, rendered)
    _respond(flow, rendered)
    return None


async def _respond_later(flow: http.HTTPFlow, rendered: Rendered) -> None:
    await asyncio.sleep(rendered.delay_s)
    _respond(flow, rendered)


def _respond(flow: http.HTTPFlow, rendered: Rendered) -> None:
    """The answer, built directly: `Response.make` re-encodes the headers and sets the body
    through the content-encoding machinery, a measurable part of a replayed turn."""
    fields = [(b"content-type", rendered.content_type.encode())]
    if rendered.status >= 400 and not rendered.retryable:
        fields.append((b"x-should-retry", b"false"))  # SDKs would otherwise retry a 409
    fields.extend((name.encode(), value.encode()) for name, value in rendered.headers)
    fields.append((b"content-length", str(len(rendered.body)).encode()))
    reason = RESPONSES.get(rendered.status, "").encode()
    now = time.time()
    flow.response = http.Response(
        b"HTTP/1.1", rendered.status, reason, http.Headers(fields), rendered.body, None, now, now
    )


class ModelBoundary:
    def __init__(self, sessions: dict[int, CassetteSession] | None = None):
        self.sessions: dict[int, CassetteSession] = dict(sessions or {})
        self.default: CassetteSession | None = None
        self._trace_path: Path | None = None
        self._signers: dict[str, UpstreamSigner] = {}  # record: from the environment
        self._stock: tuple[Mode, Upstream | Upstreams | None, traces.Trace | None] | None = None
        self._frames: sockets.Frames | None = None  # the WebSocket transport, once loaded
        self.sink = sockets.Sink()  # replay: the inert peer of sockets answered from traces

    # -- stock mitmproxy use ------------------------------------------------------------

    def load(self, loader: Any) -> None:
        proxyserver = loader.master.addons.get("proxyserver")
        if proxyserver is not None:  # how frames are sent on a live socket
            self._frames = sockets.Frames(proxyserver)
        loader.add_option(
            "flowproof_trace", str, "", "Trace file to replay from, or to write when recording."
        )
        loader.add_option(
            "flowproof_mode",
            str,
            Mode.REPLAY.value,
            "replay: answer from flowproof_trace; record: forward upstream and write it.",
            choices=[mode.value for mode in Mode],
        )
        loader.add_option(
            "flowproof_upstream",
            str,
            "",
            "Record only: the model base URL (default: FLOWPROOF_AGENT_UPSTREAM, OPENAI_BASE_URL).",
        )

    def configure(self, updated: set[str]) -> None:
        if not {"flowproof_trace", "flowproof_mode", "flowproof_upstream"} & updated:
            return
        path = ctx.options.flowproof_trace
        if not path:
            return
        self._trace_path = Path(path)
        if ctx.options.flowproof_mode not in Mode:  # mitmproxy checks no choices on --set
            raise exceptions.OptionsError(
                f"flowproof_mode is {ctx.options.flowproof_mode!r}: use replay or record"
            )
        try:
            if ctx.options.flowproof_mode == Mode.RECORD:
                upstream: Upstream | Upstreams = (
                    Upstream(ctx.options.flowproof_upstream, None)
                    if ctx.options.flowproof_upstream
                    else upstreams_from_environment(os.environ)
                )
                for note in upstream.notes if isinstance(upstream, Upstreams) else ():
                    log.warning("flowproof: %s", note)
                self._signers = upstream_signers(os.environ)
                self._stock = (Mode.RECORD, upstream, None)
            else:
                self._stock = (Mode.REPLAY, None, traces.load(self._trace_path))
        except (FlowproofError, OSError) as exc:  # no upstream, an unreadable trace
            raise exceptions.OptionsError(str(exc)) from None

    def running(self) -> None:
        """Every `-s` script has loaded by now: its matcher addons join the rules."""
        if self._stock is None:
            return
        mode, upstream, trace = self._stock
        chain = addonmanager.traverse(ctx.master.addons.chain)
        loaded: list[Rule] = list(rules_from_master_addons(chain, _stock_budget()))
        if mode is Mode.RECORD:
            rules = MatchRules(loaded)
            self.default = CassetteSession(
                Mode.RECORD, upstream=upstream, rules=rules, signers=self._signers
            )
            return
        assert trace is not None
        try:
            rules = _replay_rules(trace, self._trace_path, loaded)
            self.default = CassetteSession(
                Mode.REPLAY,
                mocks=trace.mocks,
                recorded=list(trace.turns),
                rules=rules,
                faults=ModelCalls(trace.faults),  # as the flow was recorded with them
            )
        except ConfigError as exc:
            log.error("flowproof: %s; replay is off", exc)
        except MatcherAddonError as exc:
            # Raised while rewriting the recorded requests: no session answers from the trace,
            # and the reason is logged once, without a traceback.
            log.error("flowproof: %s; replay is off", exc)

    def done(self) -> None:
        self.sink.close()
        session = self.default
        if session is None or session.mode is not Mode.RECORD or self._trace_path is None:
            return
        if session.errors:  # a trace missing what was refused would replay as a lie
            log.error(
                "flowproof: no trace was written: %s", session.errors[0].removeprefix("flowproof: ")
            )
        elif session.recorded:
            trace = traces.Trace(
                flow=self._trace_path.name, turns=session.recorded, match=session.rules.snapshot()
            )
            traces.save(self._trace_path, trace)
            log.info("flowproof: wrote %d turn(s) to %s", len(session.recorded), self._trace_path)

    # -- the hooks ----------------------------------------------------------------------

    def _session_for(self, flow: http.HTTPFlow) -> CassetteSession | None:
        sockname = flow.client_conn.sockname
        port = sockname[1] if sockname else None
        return self.sessions.get(port, self.default) if port is not None else self.default

    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        if flow.response is not None:
            return None
        dialect = routed(flow)
        session = self._session_for(flow) if dialect is not None else None
        if session is None or dialect is None:
            return None
        if is_upgrade(flow.request.headers):  # the Responses API over WebSocket
            sockets.on_upgrade(flow, session, dialect)
            return sockets.to_sink(flow, self.sink) if flow.metadata.get(sockets.SINK) else None
        if session.off_loop is not None:  # matcher addons: mitmproxy awaits the answer
            return self._answer_off_loop(flow, session, session.off_loop, dialect)
        try:
            return self._answer(flow, session, dialect)
        except Exception as exc:  # fail closed: answered, counted, never forwarded
            self._failed(flow, session, dialect, exc)
        return None

    def _failed(
        self, flow: http.HTTPFlow, session: CassetteSession, dialect: Dialect, exc: Exception
    ) -> None:
        flow.metadata.pop(PENDING, None)
        flow.metadata.pop(FORWARDED, None)
        message = f"flowproof: {could_not_handle(flow.request.path.split('?', 1)[0], exc)}"
        _respond(flow, session.refuse(dialect, 500, message, INTERNAL_KIND))

    def _answer(
        self, flow: http.HTTPFlow, session: CassetteSession, dialect: Dialect
    ) -> Awaitable[None] | None:
        body = self._received(flow, session, dialect)
        outcome = (
            body
            if isinstance(body, Rendered)
            else session.on_request(flow.request.path, body, dialect, user_agent=_user_agent(flow))
        )
        return self._apply(flow, session, outcome)

    async def _answer_off_loop(
        self, flow: http.HTTPFlow, session: CassetteSession, off_loop: OffLoop, dialect: Dialect
    ) -> None:
        """`_answer` for a flow with matcher addons: the session applies its rules in a
        thread of its own, so the addons' code never holds the event loop (the other flows,
        `--timeout`, SIGTERM and Ctrl-C go on meanwhile)."""
        try:
            body = self._received(flow, session, dialect)
            outcome = (
                body
                if isinstance(body, Rendered)
                else await off_loop.on_request(
                    flow.request.path, body, dialect, user_agent=_user_agent(flow)
                )
            )
            later = self._apply(flow, session, outcome)
            if later is not None:
                await later
        except Exception as exc:  # fail closed, as `request` does
            self._failed(flow, session, dialect, exc)

    @staticmethod
    def _received(
        flow: http.HTTPFlow, session: CassetteSession, dialect: Dialect
    ) -> bytes | Rendered:
        """The request's body for the session, or the refusal of one the proxy would not
        read (its body's encoding)."""
        if session.mocked_tools:  # the conversation view marks their results
            flow.metadata[MOCKED_TOOLS] = session.mocked_tools
        if session.conversation is not None:  # the view and `--inspect` name the turn
            flow.metadata[CONVERSATION_TURN] = session.conversation.label
        # For the secret-leak scan, as the agent sent them: a rewrite of the headers makes a
        # new tuple, so keeping this one costs nothing (decoded only if a scan reads it).
        session.headers.append(flow.request.headers.fields)
        body = request_body(flow.request)
        if isinstance(body, Refusal):
            return session.on_refused(
                flow.request.path, dialect, body.status, f"flowproof: {body.text}"
            )
        return body

    def _apply(
        self, flow: http.HTTPFlow, session: CassetteSession, outcome: Rendered | Forward
    ) -> Awaitable[None] | None:
        if isinstance(outcome, Rendered):
            flow.comment = "flowproof: answered from the trace"
            if session.divergence is not None and outcome.status >= 400:
                flow.marked = ":warning:"
                flow.comment = f"flowproof: {session.divergence.summary}"
            return _deliver(flow, outcome)
        self._forward(flow, outcome)
        mark_forwarded(flow)
        return None

    def flowproof_unknown_endpoint(self, flow: http.HTTPFlow, message: str) -> None:
        """The guard refused a path no dialect speaks on a listener of this boundary: the
        agent lost a call it meant to make, so its flow fails naming it."""
        if (session := self._session_for(flow)) is not None:
            session.errors.append(f"flowproof: {message}")

    def flowproof_refused(self, flow: http.HTTPFlow, message: str) -> None:
        """The backstop refused a request on a listener of this boundary: its flow fails."""
        if (session := self._session_for(flow)) is not None:
            session.errors.append(f"flowproof: {message}")

    @staticmethod
    def _forward(flow: http.HTTPFlow, forward: Forward) -> None:
        target = urlsplit(forward.url)
        request = flow.request
        drop_agent_credentials(request.headers)
        request.url = forward.url
        request.host_header = target.netloc
        request.content = forward.body
        if forward.body:  # a GET (a model listing) goes on without a body
            request.headers["content-type"] = "application/json"
        for name, value in forward.headers.items():
            request.headers[name] = value
        for name, value in forward.default_headers.items():
            request.headers.setdefault(name, value)
        flow.metadata[PENDING] = forward.pending
        deadline.arm(flow, forward.timeout_s)

    def response(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        if flow.metadata.get(sockets.UPGRADING) and (session := self._session_for(flow)):
            sockets.on_upgrade_answered(flow, session)
            return None
        pending = flow.metadata.pop(PENDING, None)
        if pending is None:
            return None
        deadline.disarm(flow)  # only a flow this boundary forwarded: not an MCP server's
        session = self._session_for(flow)
        if flow.response is None or session is None:
            return None
        upstream = flow.response
        content = upstream.get_content(strict=False) or b""
        status = upstream.status_code
        rendered = session.on_upstream_response(pending, status, content, upstream.headers)
        kept = [(k, v) for k, v in upstream.headers.items() if k.lower().startswith(_KEPT_PREFIXES)]
        flow.comment = "flowproof: recorded"
        if kept and not rendered.reset:
            rendered = replace(rendered, headers=(*rendered.headers, *kept))
        return _deliver(flow, rendered)

    async def websocket_message(self, flow: http.HTTPFlow) -> None:
        """A frame on a socket this boundary opened or forwarded (addons/websocket.py)."""
        session = self._session_for(flow)
        assert flow.websocket is not None
        message = flow.websocket.messages[-1]
        if sockets.PATH not in flow.metadata or session is None or message.injected:
            return  # not a model socket, or a frame flowproof sent itself
        frames, dialect = self._frames, route(flow.metadata[sockets.PATH])
        if frames is None or dialect is None:
            return
        try:
            if message.from_client:
                await frames.from_client(flow, session, dialect)
            else:
                frames.from_upstream(flow, session)
        except Exception as exc:  # fail closed: the frame goes nowhere, the flow fails
            message.drop()
            text = f"flowproof: {could_not_handle(flow.metadata[sockets.PATH], exc)}"
            session.errors.append(text)
            body = json.dumps({"error": {"message": text, "type": INTERNAL_KIND}}).encode()
            frames.send(flow, [sockets.error_frame(500, body)])

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        session = self._session_for(flow)
        if sockets.PATH in flow.metadata and session is not None:
            sockets.Frames.ended(flow, session)

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.metadata.get(sockets.UPGRADING) and (session := self._session_for(flow)):
            waited = deadline.disarm(flow)
            sockets.on_upgrade_failed(flow, session, _upstream_failure(flow, waited))
            return
        pending = flow.metadata.pop(PENDING, None)
        waited = deadline.disarm(flow) if pending is not None else None
        session = self._session_for(flow)
        if pending is not None and session is not None:
            reason = _upstream_failure(flow, waited)
            session.on_upstream_error(pending, reason, timed_out=waited is not None)


# Stock mitmdump/mitmweb: the guard first, so non-model routes are refused; the
# conversation view shows each model call as one; the backstop last, so nothing unanswered
# goes on to the reverse target. Each named for this script: `-s mcp_http.py` loads its own.
addons = [
    RequestGuard("requestguard@model"),
    ModelBoundary(),
    ConversationViews("conversationviews@model"),
    Backstop("backstop@model"),
]
