"""The cassette in use during one flow: record turns, or answer requests from recorded ones.

This is the model boundary's logic with HTTP left out: the addon hands it a path and a body
and gets back either an answer to send or a request to forward upstream (record only).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.cassette.divergence import (
    DIVERGENCE_STATUS,
    Divergence,
    explain,
    led_by_version,
    nearest_turn,
)
from flowproof_cli.cassette.faulted import (
    altered_upstream_answer,
    faulted_record,
    faulted_replay,
)
from flowproof_cli.cassette.forward import Forward, PendingTurn
from flowproof_cli.cassette.index import TurnIndex
from flowproof_cli.cassette.providers import no_upstream_reason
from flowproof_cli.cassette.turn import Turn, canonical_json
from flowproof_cli.cassette.upstream import Upstream
from flowproof_cli.cassette.upstreams import Upstreams
from flowproof_cli.dialects import Dialect, Rendered, dialect_named, route
from flowproof_cli.dialects.base import MockText, ResultSequence, ResultsExhausted
from flowproof_cli.faults.model_calls import ModelCalls
from flowproof_cli.match.agents import RunAgents
from flowproof_cli.match.patterns import PatternBudgetExceeded
from flowproof_cli.match.rules import MatcherAddonError, MatchRules
from flowproof_cli.match.user_code import Raised, SerialThread
from flowproof_cli.mode import Mode
from flowproof_cli.providers import UpstreamSigner, upstream_signers
from flowproof_cli.quoting import could_not_handle, printable, quoted
from flowproof_cli.trajectory import Trajectory

#: A tool result beyond its tool's `results:` list: the request is refused, the flow fails.
MOCKS_EXHAUSTED_STATUS = 422


def mock_text(value: Any) -> MockText:
    """What the model is told: a text mock as that text, any other value as canonical JSON;
    a `results:` sequence as one such text per call."""
    if isinstance(value, ResultSequence):
        return tuple(_one_text(item) for item in value)
    return _one_text(value)


def _one_text(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


@dataclass(frozen=True)
class _Received:
    """A request read, before the match rules: what `_answered` needs besides them."""

    dialect: Dialect
    path: str
    clean_path: str
    live: dict[str, Any]  # as the agent sent it (mocks applied), for rendering
    sent: dict[str, Any]  # its canonical form, before the match rules
    number: int  # the session's count of requests when it arrived, as failures name it
    agent: str | None = None  # `product/version` from its User-Agent (match/agents.py)
    transport: str | None = None  # "websocket" when it came as a frame


def _nothing() -> None:
    return None


_NO_TURN = OpenTurn()  # counts the calls of a one-turn flow, which nothing reads


#: The most of an upstream's body one message quotes.
_QUOTE_LIMIT = 300


def _quote(raw: bytes | str, key: str | None = None) -> str:
    """Upstream text as a message may show it: the key redacted, escaped, clipped."""
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    return quoted(text.replace(key, "[redacted]") if key else text, _QUOTE_LIMIT)


def _answer_problem(
    status: int,
    raw: bytes,
    response: Any,
    *,
    headers: Mapping[str, str],
    turn: int,
    key: str | None,
) -> str | None:
    """Why record cannot keep an upstream answer (headers lower-cased), or None."""
    said = f"flowproof: the upstream model answered turn {turn} with HTTP {status}"
    if not 200 <= status < 300:
        retry = headers.get("retry-after")
        when = f" (Retry-After: {_quote(retry, key)})" if retry else ""
        return f"{said}{when}: {_error_detail(raw, response, key)}"
    if not isinstance(response, dict):
        media = _quote(headers.get("content-type", "no content type").split(";")[0].strip())
        return (
            f"{said} but its body is not a JSON object ({media}): {_quote(raw, key) or '(empty)'}"
        )
    return None


def _described(value: Any) -> str:
    """A JSON value as a message names it: its kind, and a short one as written."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"the number {json.dumps(value)}"
    if isinstance(value, str):
        return f"the text {_quote(json.dumps(value, ensure_ascii=False))}"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    return f"a mapping of {len(value)} key(s)" if isinstance(value, dict) else repr(value)


def _unreadable(
    dialect: Dialect,
    clean_path: str,
    request: dict[str, Any],
    name: str | None,
    exc: Exception,
    *,
    mode: Mode,
) -> str:
    """Why an agent's request its API's dialect cannot read is refused as the agent's,
    naming the field and what it holds (an upstream would refuse it too)."""
    if name is not None:
        why = f"its `{name}` is {_described(request[name])}, which the {dialect.name} dialect"
    else:
        why = f"its fields together are a shape the {dialect.name} dialect"
    return (
        f"flowproof: the agent's request to {clean_path} is not a valid {dialect.name} "
        f"request: {why} cannot read ({type(exc).__name__}: {_quote(str(exc))}); it was "
        f"refused, not {'forwarded' if mode is Mode.RECORD else 'matched'}"
    )


def _error_detail(raw: bytes, response: Any, key: str | None) -> str:
    """An error body's own message where it has the usual `{"error": {"message": ...}}`."""
    error = response.get("error") if isinstance(response, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    if isinstance(message, str) and message:
        return _quote(message, key)
    return _quote(raw, key) or "(empty body)"


def _media_type(headers: Mapping[str, str], response: Any) -> str:
    if "content-type" in headers:
        return headers["content-type"]
    return "text/plain; charset=utf-8" if isinstance(response, str) else "application/json"


#: JSON values a request may hold for its divergence to be explained field by field: the
#: explanation's cost grows with them (195,000 messages kept the proxy busy for minutes).
EXPLAINED_VALUES = 100_000


def _holds_more_than(value: Any, limit: int) -> bool:
    """Whether `value` holds over `limit` JSON values; stops counting there."""
    pending, seen = [value], 0
    while pending:
        item = pending.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


#: The error type of a request flowproof could not handle (an exception, any cause).
INTERNAL_KIND = "flowproof_internal_error"


def _signed(session: CassetteSession, outcome: Forward | Rendered) -> Forward | Rendered:
    """A forward to a provider that signs what record sends (`session.signers`, from the
    provider registry), with the headers its signer gives; refused, failing the record,
    when the signer can give none (no credentials)."""
    if not isinstance(outcome, Forward):
        return outcome
    dialect = outcome.pending.dialect
    if (signer := session.signers.get(dialect.provider)) is None:
        return outcome
    headers = signer.headers_for(outcome.url, outcome.body, outcome.headers, dialect.name)
    if isinstance(headers, str):
        session.errors.append(headers)
        return _error(dialect, 502, headers, "flowproof_no_credentials")
    return replace(outcome, headers=headers)


def _error(dialect: Dialect | None, status: int, message: str, kind: str) -> Rendered:
    body = dialect.error_body(message, kind, status) if dialect else {"error": {"message": message}}
    return Rendered(status, "application/json", json.dumps(body).encode())


@dataclass
class CassetteSession:
    mode: Mode
    mocks: Mapping[str, Any] = field(default_factory=dict)
    recorded: list[Turn] = field(default_factory=list)  # replay: the cassette; record: output
    upstream: Upstream | Upstreams | None = None  # Upstreams: one per provider
    rules: MatchRules = field(default_factory=MatchRules)
    #: The recorded requests were stored by these very rules (the trace's snapshot equals
    #: them), so they are used as they are; otherwise the rules rewrite them first, which is
    #: how a rule added after recording works on an existing trace.
    recorded_as_matched: bool = False
    record_command: str = "flowproof record <spec>"  # as the messages that say to name it
    #: Record: each signing provider's signer (`_signed`); by default an empty environment's.
    signers: Mapping[str, UpstreamSigner] = field(default_factory=partial(upstream_signers, {}))

    requests: int = 0
    served: list[int] = field(default_factory=list)  # replay: recorded positions used
    divergence: Divergence | None = None
    errors: list[str] = field(default_factory=list)
    routes: dict[str, int] = field(default_factory=dict)
    # Recorded position -> the canonical request as the agent sent it, kept only where match
    # rules changed it (at most one per turn): the secret-leak scan reads what was sent.
    sent: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Every request's header fields as the agent sent them (name, value bytes), in arrival
    # order: record forwards all but the auth headers, so the secret-leak scan reads them.
    # Never stored.
    headers: list[tuple[tuple[bytes, bytes], ...]] = field(default_factory=list)
    # Record: why the upstream stopped answering, once a forwarded call timed out. The
    # flow's further requests get the same error at once instead of another full wait (an
    # SDK retries a 502 by itself).
    upstream_gone: str | None = None
    #: Called at the first divergence, which settles the verdict: the cue to stop the agent.
    on_divergence: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    agents: RunAgents = field(default_factory=RunAgents)  # who sent this run's requests
    notes: list[str] = field(default_factory=list)  # how the agent was answered (a 426)
    #: A conversation flow's open turn, which the runner moves on; None: a one-turn flow.
    conversation: OpenTurn | None = None
    #: The flow's model faults and the calls they hit (flowproof_cli/faults/).
    faults: ModelCalls = field(default_factory=ModelCalls)

    def __post_init__(self) -> None:
        self._mock_text = {name: mock_text(value) for name, value in self.mocks.items()}
        self.mocked_tools = sorted(self.mocks)  # the mocks are fixed: sorted once, not per call
        self._matched: list[Turn] = []  # replay: the recorded turns as today's rules see them
        rematch = self.rules.active and not self.recorded_as_matched
        try:
            if self.mode is Mode.REPLAY and rematch:
                self._matched = matchable_turns(self.recorded, self.rules)
            elif self.mode is Mode.REPLAY:
                self._matched = list(self.recorded)
        except PatternBudgetExceeded as exc:  # the flow fails; every request is refused
            self.errors.append(f"flowproof: {exc}")
            self._matched = list(self.recorded)
        self.index = TurnIndex(self._matched) if self.mode is Mode.REPLAY else None
        self._known_calls: dict[str, str] = {}  # call id -> tool name, from served responses
        # Matcher addons among the rules: the event loop has them applied off it, here.
        self.off_loop = OffLoop(self) if self.rules.runs_user_code else None

    # -- requests -----------------------------------------------------------------------

    def on_request(
        self,
        path: str,
        body: bytes,
        dialect: Dialect | None = None,
        user_agent: str | None = None,
        transport: str | None = None,
    ) -> Rendered | Forward:
        """Answer or forward one request (`dialect`: `route(path)` when the caller has it;
        `user_agent`: its header, which names the agent and version that sent it;
        `transport`: "websocket" for a request sent as a frame). Whatever
        goes wrong is an answer that fails the flow, never an exception: one escaping the
        proxy's hook would let the request on toward the placeholder target. When the rules
        run matcher addons this waits on their scripts' threads: the event loop calls
        `off_loop.on_request` instead."""
        read = self._received(path, body, dialect, user_agent, transport)
        return read if isinstance(read, Rendered) else self._answered(read, self._relaxed(read))

    def on_refused(self, path: str, dialect: Dialect, status: int, message: str) -> Rendered:
        """A request the proxy would not read (its body's encoding): counted, refused. A 500
        (decoding raised) is of the internal kind, as every exception while handling is."""
        self._count(path)
        kind = INTERNAL_KIND if status >= 500 else "invalid_request_error"
        return self.refuse(dialect, status, message, kind)

    def _count(self, path: str) -> str:
        """Count one request; its path (query left off) as messages quote it."""
        self.requests += 1
        (self.conversation or _NO_TURN).call()
        clean_path = printable(path.split("?", 1)[0])
        self.routes[clean_path] = self.routes.get(clean_path, 0) + 1
        return clean_path

    def refuse(self, dialect: Dialect, status: int, message: str, kind: str) -> Rendered:
        """An error answer that fails the flow too (`message` is what both are told)."""
        self.errors.append(message)
        return _error(dialect, status, message, kind)

    def _internal(self, dialect: Dialect, clean_path: str, exc: BaseException) -> Rendered:
        """Any input, any bug: an answer, never an exception."""
        message = f"flowproof: {could_not_handle(clean_path, exc)}"
        return self.refuse(dialect, 500, message, INTERNAL_KIND)

    def _received(
        self,
        path: str,
        raw_body: bytes,
        dialect: Dialect | None,
        user_agent: str | None = None,
        transport: str | None = None,
    ) -> Rendered | _Received:
        """The request counted and read (mocks applied, canonical form), or its refusal."""
        if dialect is None:
            dialect = route(path)
        if dialect is None:
            message = f"flowproof: {printable(path)} is not a model endpoint flowproof records"
            return _error(None, 404, message, "flowproof_unknown_endpoint")
        clean_path = self._count(path)
        try:
            read = _read(self, dialect, path, clean_path, raw_body)
        except Exception as exc:  # any input, any bug: an answer
            return self._internal(dialect, clean_path, exc)
        if isinstance(read, _Received):  # who sent it, once it is a request to answer
            agent = self.agents.read(user_agent, self.rules.agent_tokens)
            read = replace(read, agent=agent, transport=transport)
        return read

    def _relaxed(self, read: _Received) -> dict[str, Any] | Rendered:
        """The request as matched (the rules applied), or the refusal of a rule that failed,
        recorded at once: it fails the flow even if its answer is never sent."""
        try:
            subject = f"the agent's model request {read.number}"
            return self.rules.matched(read.dialect.name, read.sent, subject=subject)
        except (MatcherAddonError, PatternBudgetExceeded) as exc:
            return self.refuse(read.dialect, 500, f"flowproof: {exc}", "flowproof_matcher_error")
        except Exception as exc:  # any bug: an answer
            return self._internal(read.dialect, read.clean_path, exc)

    def _answered(self, read: _Received, relaxed: dict[str, Any] | Rendered) -> Rendered | Forward:
        if isinstance(relaxed, Rendered):
            return relaxed
        dialect, live = read.dialect, read.live
        try:
            if self.mode is Mode.RECORD:
                tag = self.conversation.number if self.conversation else None
                pending = PendingTurn(
                    dialect, live, relaxed, read.sent, read.agent, read.transport, None, tag
                )
                forward = partial(self._forward, dialect, read.path, live)
                faulted = faulted_record(self, pending, forward)
                return _signed(self, faulted or forward(pending))
            return self._replay(read, relaxed)
        except Exception as exc:  # any bug: an answer
            return self._internal(dialect, read.clean_path, exc)

    def _forward(
        self, dialect: Dialect, path: str, live: dict[str, Any], pending: PendingTurn
    ) -> Forward | Rendered:
        target = _target(self, dialect)
        if isinstance(target, Rendered):
            return target
        forwarded = dialect.upstream_body(live)
        body = b"" if forwarded is None else json.dumps(forwarded, ensure_ascii=False).encode()
        return Forward(
            url=target.url_for(dialect, path),
            body=body,
            headers=target.auth_headers(dialect),
            default_headers=dialect.upstream_default_headers(),
            pending=replace(pending, upstream=target),
            timeout_s=target.timeout_s,
        )

    def on_upstream_response(
        self,
        pending: PendingTurn,
        status: int,
        raw: bytes,
        headers: Mapping[str, str] | None = None,
    ) -> Rendered:
        """The upstream's answer, kept as the next turn and rendered for the agent. One that
        record cannot keep (an error status, a body that is not a JSON object its dialect
        reads) reaches the agent as the upstream sent it and fails the flow, so no trace of
        it is written."""
        upstream = pending.upstream
        if upstream is not None:
            raw = upstream.without_key(raw)
        lowered = {name.lower(): value for name, value in (headers or {}).items()}
        try:
            response: Any = json.loads(raw)
        except (ValueError, RecursionError):
            response = raw.decode("utf-8", "replace")
        if upstream is not None and upstream.without_key_across_parts(response):
            raw = json.dumps(response, ensure_ascii=False).encode()
        position = len(self.recorded) if pending.replaces is None else pending.replaces
        _keep_sent(self, position, pending.sent, pending.canonical)
        key = upstream.key if upstream else None
        problem = _answer_problem(
            status, raw, response, headers=lowered, turn=position + 1, key=key
        )
        if problem is None:
            try:
                return self._keep_answer(pending, status, response, position)
            except Exception as exc:  # any shape a hostile upstream sends: never a traceback
                problem = (
                    f"flowproof: the upstream model's answer to turn {position + 1} is not a "
                    f"valid {pending.dialect.name} answer ({type(exc).__name__}: "
                    f"{_quote(str(exc), key)}): {_quote(raw, key)}"
                )
        _store(self, position, pending.turn(status, response))
        self.errors.append(problem)
        return Rendered(status, _media_type(lowered, response), raw)

    def _keep_answer(
        self, pending: PendingTurn, status: int, response: Any, position: int
    ) -> Rendered:
        """Record a good answer; raises when its dialect cannot read it (the trajectory
        would fail later, in the verdict, instead)."""
        stored = self.rules.stored_response(response)
        live = self.rules.live_response(stored)
        pending.dialect.read_answer(pending.canonical, live, position + 1)
        rendered = self.render(pending.dialect, pending.live_request, status, response)
        _store(self, position, pending.turn(status, stored))
        return altered_upstream_answer(self, pending, rendered, position)

    def on_upstream_error(
        self, pending: PendingTurn, reason: str, *, timed_out: bool = False
    ) -> Rendered:
        """A forwarded call that got no answer. After a timeout every further request is
        answered with the same error, without waiting on the upstream again."""
        message = f"flowproof: could not reach the upstream model: {reason}"
        self.errors.append(message)
        if timed_out and self.upstream_gone is None:
            self.upstream_gone = message
        return _error(pending.dialect, 502, message, "flowproof_upstream_error")

    def _replay(self, read: _Received, canonical: dict[str, Any]) -> Rendered:
        assert self.index is not None
        dialect, clean_path, live, sent = read.dialect, read.clean_path, read.live, read.sent
        if self.divergence is not None:
            message = f"flowproof: replay stopped after a divergence: {self.divergence.summary}"
            return _error(dialect, DIVERGENCE_STATUS, message, "flowproof_divergence")
        if (faulted := faulted_replay(self, dialect, live, canonical)) is not None:
            return faulted
        tag = self.conversation.number if self.conversation else None
        position = self.index.claim(dialect.name, canonical, tag)
        if position is not None:
            self.served.append(position)
            turn = self.recorded[position]
            _keep_sent(self, position, sent, turn.request)
            response = self.rules.live_response(turn.response)
            return self.render(dialect, live, turn.status, response)
        unreadable = dialect.unreadable_field(sent)
        if unreadable is not None:  # no divergence to explain: the agent's request is broken
            message = _unreadable(dialect, clean_path, sent, *unreadable, mode=self.mode)
            return self.refuse(dialect, 400, message, "invalid_request_error")
        self.divergence = _explained(self, dialect, canonical, read.agent)
        (self.on_divergence or _nothing)()  # once: later requests are refused above
        return _error(
            dialect,
            DIVERGENCE_STATUS,
            f"flowproof: {self.divergence.message}",
            "flowproof_divergence",
        )

    def render(
        self, dialect: Dialect, live: dict[str, Any], status: int, response: Any
    ) -> Rendered:
        if self._mock_text and isinstance(response, dict) and status == 200:
            # Only mock substitution reads the calls seen; without mocks, skip the extraction.
            self._known_calls.update(dialect.call_names(response))
        if not isinstance(response, dict):
            return Rendered(status, "text/plain; charset=utf-8", str(response).encode())
        return dialect.render(live, status, response, stream=dialect.wants_stream(live))

    # -- results ------------------------------------------------------------------------

    def used_turns(self) -> list[int]:
        if self.mode is Mode.RECORD:
            return list(range(len(self.recorded)))
        return sorted(self.served)

    def close(self) -> None:
        """Its flow is over: the thread of `off_loop`, if any, ends."""
        if self.off_loop is not None:
            self.off_loop.close()

    def trajectory(self) -> Trajectory:
        """The served turns in recorded order, so record and replay agree."""
        return served_trajectory(self.recorded, self.used_turns(), self.rules)


def _keep_sent(
    session: CassetteSession, position: int, sent: dict[str, Any], stored: dict[str, Any]
) -> None:
    """A rule may have normalized or dropped what the agent sent; keep the original
    (computed once per request in `on_request`, never again here)."""
    if session.rules.active and sent is not stored and sent != stored:
        session.sent[position] = sent


def _read(
    session: CassetteSession, dialect: Dialect, path: str, clean_path: str, raw_body: bytes
) -> Rendered | _Received:
    """A request's body read, its mocks applied and its canonical form made, or why not."""
    try:
        # A GET (a model listing) has no body: what it asks is in its path and query.
        body = {} if dialect.method == "GET" else json.loads(raw_body or b"null")
    except RecursionError:  # an exception like any other (500), worded for what it is
        message = f"flowproof: the request to {clean_path} is JSON nested too deeply to read"
        return session.refuse(dialect, 500, message, INTERNAL_KIND)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        message = f"flowproof: the request to {clean_path} is not a JSON object"
        return session.refuse(dialect, 400, message, "invalid_request_error")
    try:
        live = dialect.apply_mocks(
            dialect.normalize(path, body), session._mock_text, session._known_calls
        )
    except ResultsExhausted as exc:  # the flow fails; the agent gets an error, not a hang
        message = f"flowproof: {exc}"
        return session.refuse(dialect, MOCKS_EXHAUSTED_STATUS, message, "flowproof_mock_exhausted")
    sent = dialect.canonical_request(live)
    # The agent's mistake, never forwarded. (Replay reads only a request that matches no
    # turn: one that matches equals a recorded request, read when the trace loaded.)
    unreadable = dialect.unreadable_field(sent) if session.mode is Mode.RECORD else None
    if unreadable is not None:
        message = _unreadable(dialect, clean_path, sent, *unreadable, mode=session.mode)
        return session.refuse(dialect, 400, message, "invalid_request_error")
    return _Received(dialect, path, clean_path, live, sent, session.requests)


def _store(session: CassetteSession, position: int, turn: Turn) -> None:
    """Keep a recorded turn: the next, or in place of a fault's answer its retry replaces."""
    if position < len(session.recorded):
        session.recorded[position] = turn
    else:
        session.recorded.append(turn)


def _target(session: CassetteSession, dialect: Dialect) -> Upstream | Rendered:
    """Record: the upstream of the dialect's provider, or the answer when there is none to
    forward to (it fails the flow)."""
    upstream = session.upstream
    target = upstream.for_provider(dialect.provider) if upstream else None
    if target is None:
        message = f"flowproof: {no_upstream_reason(dialect.provider, upstream is None)}"
        session.errors.append(message)
        return _error(dialect, 502, message, "flowproof_no_upstream")
    if session.upstream_gone is not None:  # the record has failed on it already
        session.errors.append(session.upstream_gone)
        return _error(dialect, 502, session.upstream_gone, "flowproof_upstream_error")
    return target


def upgrade_target(
    session: CassetteSession, path: str, dialect: Dialect
) -> tuple[str, dict[str, str]] | Rendered:
    """Record: the upstream URL and auth headers a WebSocket upgrade of `path` goes to
    (the socket's frames are the requests: the upgrade itself is not counted)."""
    target = _target(session, dialect)
    if isinstance(target, Rendered):
        return target
    return target.url_for(dialect, path), target.auth_headers(dialect)


def recorded_over(session: CassetteSession, transport: str) -> bool:
    """Replay: whether any recorded turn came over `transport` (a trace recorded over HTTP
    had its client fall back, so replay refuses the upgrade the same way)."""
    return any(turn.transport == transport for turn in session.recorded)


def _explained(
    session: CassetteSession, dialect: Dialect, canonical: dict[str, Any], agent: str | None
) -> Divergence:
    """The divergence of `canonical` from the turns not yet served, led by a version change."""
    index, turn = session.index, session.conversation
    assert index is not None
    if turn is None:
        found = explain_divergence(session._matched, index.unconsumed(), dialect, canonical)
        return led_by_version(found, session._matched, agent, session.record_command)
    free = index.unconsumed(turn.number)
    found = explain_divergence(session._matched, free, dialect, canonical)
    found = led_by_version(found, session._matched, agent, session.record_command)
    recorded = sum(1 for each in session._matched if each.conversation_turn == turn.number)
    elsewhere = index.elsewhere(dialect.name, canonical, turn.number)
    return turn.worded(found, turn.calls, recorded, elsewhere)


def turn_trajectory(session: CassetteSession, *numbers: int) -> Trajectory:
    """The trajectory of conversation turns `numbers`: the calls served (record: made)
    while they were open, in recorded order."""
    recorded = session.recorded
    used = [p for p in session.used_turns() if recorded[p].conversation_turn in numbers]
    return served_trajectory(recorded, used, session.rules)


def served_trajectory(recorded: list[Turn], used: list[int], rules: MatchRules) -> Trajectory:
    """The trajectory of the `used` turns of `recorded`, answers as this run serves them."""
    trajectory = Trajectory()
    for position in used:
        turn = recorded[position]
        if turn.status != 200 or not isinstance(turn.response, dict):
            continue
        dialect = dialect_named(turn.protocol)
        response = rules.live_response(turn.response)
        trajectory.add(dialect.read_answer(turn.request, response, position + 1))
    return trajectory


class OffLoop:
    """A session whose rules run matcher addons, answered from the event loop: the rules are
    applied in a thread of the session's own, so an addon's code never holds the loop (each
    of its calls within its budget, match/user_code.py). The request is read and answered
    on the loop as `on_request` does, so only the rules' counts change in that thread."""

    def __init__(self, session: CassetteSession) -> None:
        self._session = session
        self._thread = SerialThread("match rules", budget_s=None)

    async def on_request(
        self,
        path: str,
        raw_body: bytes,
        dialect: Dialect | None = None,
        *,
        user_agent: str | None = None,
        transport: str | None = None,
    ) -> Rendered | Forward:
        session = self._session
        read = session._received(path, raw_body, dialect, user_agent, transport)
        if isinstance(read, Rendered):
            return read
        try:
            relaxed = await self._thread.run("match rules", session._relaxed, read)
        except Raised as exc:  # a bug of flowproof's own: answered like any other
            relaxed = session._internal(read.dialect, read.clean_path, exc.original)
        return session._answered(read, relaxed)

    async def settled(self) -> None:
        """Once every request handed to the thread is through it (each within its addons'
        budgets), so the flow is judged with whatever they found."""
        await self._thread.run("settled", _nothing)

    def close(self) -> None:
        self._thread.close()


def matchable_turns(recorded: list[Turn], rules: MatchRules) -> list[Turn]:
    """The recorded turns with the requests as today's rules match them (replay matches
    against these, so a rule added after recording works on an existing trace)."""
    return [
        replace(
            turn,
            request=rules.matched(
                turn.protocol,
                turn.request,
                count=False,
                subject=f"the recorded request of turn {position}",
            ),
        )
        for position, turn in enumerate(recorded, start=1)
    ]


def explain_divergence(
    matched: list[Turn], free: list[int], dialect: Dialect, canonical: dict[str, Any]
) -> Divergence:
    """Why `canonical` matched none of the `free` (unconsumed) recorded turns: an extra
    call, or its nearest recorded turn and what changed."""
    if not free:
        return Divergence(
            0,
            f"extra call: the agent made a model call beyond the {len(matched)} "
            "recorded (every recorded turn was already used)",
        )
    position = nearest_turn(matched, free, dialect.name, canonical)
    recorded = matched[position]
    if _holds_more_than(canonical, EXPLAINED_VALUES) or _holds_more_than(
        recorded.request, EXPLAINED_VALUES
    ):
        return Divergence(
            position + 1,
            f"turn {position + 1}: request changed (it holds over {EXPLAINED_VALUES} JSON "
            "values, too many to explain field by field)",
        )
    return explain(position + 1, recorded, dialect.name, canonical)
