"""The contract every model wire dialect implements.

A dialect knows one API's JSON shapes and nothing about files, HTTP servers or matching:
it turns a request body into its canonical form, rewrites mocked tool results, extracts the
assistant's tool calls and text, outlines a request for divergence reports, and renders a
recorded response back to the client (as JSON or as a synthesized SSE stream). It also owns
what the rest of flowproof would otherwise keep per dialect: which requests are its own
(`route_suffixes`, `method`, `claims`), the headers its credential travels in
(`auth_headers`, `upstream_auth`), how a streamed answer reads back (`answer_from_body`) and
doctor's canned answer (`canned_response`). Adding a provider is one module and its
registration in `dialects/__init__.py`; `tests/unit/test_dialect_registry.py` walks the
registry and fails for a dialect missing a part.

A dialect is a chat dialect (`kind = "chat"`: its answers are the model's turns, read for
tool calls and the reply) or an endpoint (`kind = "endpoint"`: embeddings, moderation,
token counts, model listings, legacy completions; see `dialects/endpoint.py`). Both are
recorded and replayed as turns of their own and matched strictly; only chat answers enter
the trajectory's turns, an endpoint's answer is an `EndpointCall` beside them.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from flowproof_cli.dialects.sse import sse_payloads
from flowproof_cli.trajectory import AssistantTurn, EndpointCall

JSON = dict[str, Any]

#: `Dialect.kind`: a conversation turn (tool calls, the reply), or a call around it.
CHAT = "chat"
ENDPOINT = "endpoint"

# The JSON a recorded response is served as (built once: `json.dumps` with an option
# builds a new encoder on every call).
_WIRE = json.JSONEncoder(ensure_ascii=False, check_circular=False)

# Fields that only steer the transport; never stored, never matched.
TRANSPORT_FIELDS = frozenset({"stream", "stream_options"})


def without_transport(body: JSON) -> JSON:
    """The body minus its transport-only fields."""
    return {key: value for key, value in body.items() if key not in TRANSPORT_FIELDS}


def text_of(content: Any, joiner: str = "") -> str:
    """The text of a content value: the string, or the string `text` of its parts joined
    (`joiner` between them); other values as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return joiner.join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return json.dumps(content, sort_keys=True)


def bare_key(key: str) -> str:
    """A record key with any `Bearer ` prefix removed (for APIs with their own key header)."""
    return key[len("bearer ") :].strip() if key.lower().startswith("bearer ") else key


@dataclass(frozen=True)
class MessageOutline:
    """One conversation entry reduced to what a divergence report compares."""

    role: str
    content: Any  # text, or the dialect's content blocks
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, raw arguments) asked for by it
    # The whole entry as sent, so a change in any other field is seen (compared separately).
    raw: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class RequestOutline:
    """The envelope of a request, compared coarse-to-fine when a replay diverges."""

    model: Any
    tools: dict[str, Any]  # name -> full declaration (schema, description)
    messages: tuple[MessageOutline, ...]
    parameters: dict[str, Any] = field(default_factory=dict)  # everything else


class ResultSequence(list[Any]):
    """A tool's `results: [...]`: the k-th call of the tool gets the k-th value.

    A list, so it serializes (JSON, the stand-in's session file) like the values it holds;
    it equals only another sequence, so `result: [a, b]` and `results: [a, b]` differ.
    """

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResultSequence) and list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None


class ResultsExhausted(ValueError):
    """A call of a tool beyond the values its `results:` lists: the flow fails, naming both."""

    def __init__(self, tool: str, calls: int, listed: int):
        self.tool, self.calls, self.listed = tool, calls, listed
        super().__init__(
            f"tool `{tool}` was called {calls} times but its `results` lists {listed}. Fix: "
            f"add a result for call {calls} to `results`, or make the agent call `{tool}` "
            f"at most {listed} time(s)"
        )


#: A mock as the model is told it: one text for every call, or one per call (`results:`).
MockText = str | tuple[str, ...]


class _ResultCounter:
    """Numbers the results of each mocked tool in one request and picks their texts."""

    def __init__(
        self,
        mocks: Mapping[str, MockText],
        in_request: Mapping[str, str],
        known_calls: Mapping[str, str],
    ) -> None:
        self.mocks = mocks
        self.in_request = in_request
        self.names = {**known_calls, **in_request}
        # Calls answered in this request although made in an earlier response only.
        self.earlier: dict[str, list[str]] = {}
        for call_id, name in known_calls.items():
            if call_id not in in_request:
                self.earlier.setdefault(name, []).append(call_id)
        self.seen: dict[str, int] = {}

    def lookup(self, call_id: str | None, name: Any = None) -> str | None:
        if not name and call_id is not None:
            name = self.names.get(call_id)
        mock = self.mocks.get(name) if isinstance(name, str) else None
        if mock is None or isinstance(mock, str):
            return mock
        assert isinstance(name, str)
        earlier = self.earlier.get(name, [])
        if call_id is not None and call_id in earlier:
            index = earlier.index(call_id)
        else:
            index = self.seen.get(name, 0)
            self.seen[name] = index + 1
        if index >= len(mock):
            raise ResultsExhausted(name, index + 1, len(mock))
        return mock[index]


#: Finds the mock text for one tool result: (call id, tool name the result names itself, if
#: any) -> the mock's JSON text, or None when the result's tool is not mocked.
MockLookup = Callable[[str | None, Any], str | None]


class PlainRequestRefused(ValueError):
    """A dialect that builds no plain request of flowproof's own (`Dialect.plain_request`)."""

    def __init__(self, dialect: str):
        self.dialect = dialect
        super().__init__(
            f"flowproof builds its own requests (a simulated user's) only in the openai-chat, "
            f"openai-responses, anthropic and gemini dialects, not in {dialect}"
        )


#: `Dialect.plain_request`'s conversation: (role, text), the role `user` or `assistant`.
PlainMessages = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Rendered:
    """A response ready to send to the client. A fault (flowproof_cli/faults/) may add
    headers the provider sends with it, a wait before it, or a connection closed instead."""

    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()  # sent as they are (a retry-after)
    delay_s: float = 0.0  # seconds the answer waits before it is sent
    reset: bool = False  # no answer: the connection is closed
    retryable: bool = False  # an error the agent's SDK may retry (no `x-should-retry: false`)


class Dialect(ABC):
    """One model API wire format."""

    #: Stable tag stored on each turn of the cassette.
    name: str
    #: Which provider speaks it (a name in `flowproof_cli/providers/`): the record upstream
    #: and key it uses, and how record signs what it forwards.
    provider: str = "openai"
    #: CHAT (answers are the model's turns) or ENDPOINT (a call beside them, never the reply).
    kind: str = CHAT
    #: The HTTP method of its requests. A GET carries no body: what it asks is in the path
    #: and query, which `normalize` folds into the request as matched.
    method: str = "POST"
    #: Path suffixes this dialect answers (matched on the last segments of the path).
    route_suffixes: tuple[str, ...]
    #: Request headers that carry the client's credential: never forwarded (record sets its
    #: own key with `upstream_auth`, into one of these), scanned for leaks like the rest.
    auth_headers: tuple[str, ...] = ("authorization",)
    #: Whether a client may ask for its answer as a stream (`render(..., stream=True)`).
    streams: bool = True
    #: The content type of its streamed answers.
    stream_media_type: str = "text/event-stream"
    #: A small valid request, as the API documents it: doctor's canned answer and the
    #: registry test render, stream and read back an answer to it.
    example_request: ClassVar[JSON] = {}
    #: The path its real client sends `example_request` to, when the route suffix alone
    #: does not make one this dialect claims (Azure's deployment, Vertex's project).
    example_path: ClassVar[str | None] = None
    #: The request field holding the conversation (messages, input items, contents).
    conversation_key: str
    #: Request fields carrying the system prompt beside the conversation (the outline shows
    #: them as its first entry, not as parameters).
    system_fields: tuple[str, ...] = ()
    #: Whether its route is also served over WebSocket (dialects/websocket.py): an upgrade
    #: on the route of a dialect without it is answered 426, so the client uses HTTP.
    websocket: bool = False

    def claims(self, path: str, headers: Mapping[str, str]) -> bool | None:
        """Whether a request whose path ends in one of `route_suffixes` is this dialect's,
        for routes two providers share (`GET .../models`; Azure's `/openai/v1/...`):
        True claims it over every dialect that does not, False declines it, None (the
        default) takes it when no dialect claims it. Decided from the path and the headers
        the client sent (lower-case names; empty when the caller has none), never guessed.
        """
        return None

    def normalize(self, path: str, body: JSON) -> JSON:
        """The body with whatever the dialect carries in the path folded in (Gemini puts the
        model and streaming in the URL). Called before mocks and matching."""
        return body

    def canonical_request(self, body: JSON) -> JSON:
        """The request as stored and matched: every field except transport-only ones."""
        return without_transport(body)

    def wants_stream(self, body: JSON) -> bool:
        return bool(body.get("stream"))

    def apply_mocks(
        self, body: JSON, mocks: Mapping[str, MockText], known_calls: dict[str, str]
    ) -> JSON:
        """Replace the content of every tool result whose call named a mocked tool.

        ``mocks`` maps tool name -> the mock's text: one text answers every call, a tuple
        (``results:``) answers call by call. The k-th result of a tool in the request's
        conversation, in order, gets text k, so every request of a run is rewritten the same
        way and record and replay agree; a result answering a call made in an earlier
        response only (Responses API chains via ``previous_response_id``) counts after the
        calls of that tool in earlier responses (``known_calls``: call id -> tool name, in
        the order the run saw them). A result whose call id is unknown is left alone.
        Raises ``ResultsExhausted`` for a result beyond its tool's list. Returns a new body;
        the input is not modified.
        """
        entries = body.get(self.conversation_key)
        if not mocks or not isinstance(entries, list):
            return body
        in_request: dict[str, str] = {}
        for entry in entries:
            if isinstance(entry, dict):
                in_request.update(self._calls_in(entry))
        counter = _ResultCounter(mocks, in_request, known_calls)
        rewritten = [
            self._mock_results(entry, counter.lookup) if isinstance(entry, dict) else entry
            for entry in entries
        ]
        return {**body, self.conversation_key: rewritten}

    @abstractmethod
    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        """(call id, tool name) of each tool call one conversation entry makes."""

    @abstractmethod
    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        """The entry with each tool result it carries whose `lookup` finds a mock text
        answered by that text (the entry itself when it carries none)."""

    def call_names(self, response: JSON) -> dict[str, str]:
        """Tool call id -> tool name for the calls a response asked for."""
        return {
            call.call_id: call.name
            for call in self.assistant_turn({}, response, 0).tool_calls
            if call.call_id
        }

    @abstractmethod
    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        """The text and tool calls of a recorded response, for the trajectory."""

    def read_answer(self, request: JSON, response: JSON, turn: int) -> AssistantTurn | EndpointCall:
        """A successful recorded answer as the trajectory holds it: a chat dialect's
        `assistant_turn`, an endpoint's `endpoint_call`. Raises when it cannot be read."""
        if self.kind == ENDPOINT:
            return self.endpoint_call(request, response, turn)
        return self.assistant_turn(request, response, turn)

    def endpoint_call(self, request: JSON, response: JSON, turn: int) -> EndpointCall:
        """An endpoint's turn as `show`, the trajectory diff and the conversation view list
        it: what was asked, what came back, one line each."""
        return EndpointCall(
            turn=turn,
            protocol=self.name,
            model=request.get("model"),
            asked=self.describe_request(request),
            answered=self.describe_answer(response),
        )

    def describe_request(self, request: JSON) -> str:
        """What an endpoint request asks, in one line (its outline's entries as text)."""
        shown = [
            f"{message.role}: {text_of(message.content) or json.dumps(message.content)}"
            for message in self.outline(request).messages
        ]
        return "; ".join(shown) or "(nothing asked)"

    def describe_answer(self, response: JSON) -> str:
        """What an endpoint answered, in one line (every endpoint says it its own way)."""
        raise NotImplementedError(f"{self.name} does not describe its answers")

    def unreadable_field(self, request: JSON) -> tuple[str | None, Exception] | None:
        """None when this dialect reads `request` as the judge and a divergence report will;
        otherwise the top-level field it cannot read (None when only fields together fail)
        and the error. Only a failing request is read again, field by field."""
        try:
            self._read_request(request)
            return None
        except Exception as exc:  # an agent's request can hold any JSON anywhere
            whole = exc
        for name, value in request.items():
            try:
                self._read_request({name: value})
            except Exception as exc:
                return name, exc
        return None, whole

    def _read_request(self, request: JSON) -> None:
        """Read a request as the trajectory and a divergence outline do. The conversation
        is walked by the outline only: the trajectory would also serialize it whole."""
        self.outline(request)
        thin = {key: value for key, value in request.items() if key != self.conversation_key}
        self.assistant_turn(thin, {}, 0)

    def outline(self, request: JSON) -> RequestOutline:
        """The request's model, tools and conversation, for divergence reports."""
        return RequestOutline(
            model=request.get("model"),
            tools=dict(self._tools_in(request)),
            messages=tuple(self._messages_in(request)),
            parameters={k: v for k, v in request.items() if k not in self._outline_fields},
        )

    @property
    def _outline_fields(self) -> frozenset[str]:
        """The fields the outline shows apart; every other field is a parameter."""
        return frozenset({"model", "tools", self.conversation_key, *self.system_fields})

    @abstractmethod
    def _tools_in(self, request: JSON) -> Iterator[tuple[str, Any]]:
        """(name, full declaration) of each tool the request offers."""

    @abstractmethod
    def _messages_in(self, request: JSON) -> Iterator[MessageOutline]:
        """The request's conversation (its system prompt first), one outline an entry."""

    def render(self, request: JSON, status: int, response: JSON, *, stream: bool) -> Rendered:
        """The recorded response as the client expects it: JSON, or (a successful turn asked
        for as a stream) the SSE stream synthesized from it. Errors are always JSON."""
        if not stream or status != 200:
            return Rendered(status, "application/json", _WIRE.encode(response).encode())
        return Rendered(200, "text/event-stream", self.stream_events(request, response).encode())

    @abstractmethod
    def stream_events(self, request: JSON, response: JSON) -> str:
        """The SSE stream a real server would have sent for this recorded response.

        Deterministic: every id, timestamp and sequence number comes from the recording.
        """

    def answer_from_body(self, data: bytes, content_type: str | None) -> tuple[Any, str]:
        """The answer a response body carries, a stream reassembled into the JSON answer it
        streams (what the conversation view reads), and how it came (`""` for plain JSON,
        `", reassembled from 12 SSE events"`). A dialect whose stream is not SSE (NDJSON,
        AWS event-stream frames, a JSON array of chunks) overrides this. Raises ValueError
        for a body it cannot read."""
        media = (content_type or "").split(";")[0].strip().lower()
        sniffed = not media and data.lstrip()[:6].startswith((b"data:", b"event:", b"id:"))
        if media == "text/event-stream" or sniffed:
            events = sse_payloads(data)
            if not events:
                raise ValueError("an event stream without one JSON event")
            return self.reassemble_events(events), f", reassembled from {len(events)} SSE events"
        return json.loads(data), ""

    def reassemble_events(self, events: list[tuple[str, Any]]) -> JSON:
        """The JSON answer an SSE stream of this dialect carries, from its events' (name,
        parsed data): the inverse of `stream_events`, for streams real servers sent too."""
        raise ValueError(f"{self.name} answers are not streamed")

    def canned_response(self, request: JSON, text: str) -> JSON:
        """A small valid answer to `request` (normalized) saying `text` where the API has
        text: `flowproof doctor` and `init` answer every call of this dialect with it."""
        raise NotImplementedError(f"{self.name} has no canned answer")

    def upstream_url(self, base_url: str, query: str) -> str:
        """The upstream endpoint for this dialect under the configured base URL."""
        url = f"{base_url.rstrip('/')}/{self.route_suffixes[0]}"
        return f"{url}?{query}" if query else url

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        """The upstream endpoint for an agent request path (its query string kept)."""
        query = path.split("?", 1)[1] if "?" in path else ""
        return self.upstream_url(base_url, query)

    def upstream_auth(self, key: str) -> dict[str, str]:
        """Headers carrying the record key upstream (a bare key is Bearer-wrapped)."""
        value = key if key.lower().startswith("bearer ") else f"Bearer {key}"
        return {"authorization": value}

    def upstream_default_headers(self) -> dict[str, str]:
        """Headers the upstream requires, added at record only when the agent sent none."""
        return {}

    def upstream_body(self, body: JSON) -> JSON | None:
        """What record forwards upstream: always non-streaming, so record and replay
        serve the same synthesized bytes. None: the request has no body (a GET)."""
        if self.method == "GET":
            return None
        return without_transport(body)

    def plain_request(self, model: str, system: str, messages: PlainMessages) -> tuple[str, JSON]:
        """A request of flowproof's own (the simulated user's, runner/simulated_user.py):
        (the path it goes to, its body as this dialect normalizes it) for `model`, with the
        system prompt `system` and `messages` ((role, text), `user` first, alternating with
        `assistant`). No tools, no sampling fields: the API's defaults. A dialect that does
        not build one raises PlainRequestRefused."""
        raise PlainRequestRefused(self.name)

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        """A JSON error in the dialect's own error shape, for an answer with HTTP `status`
        (a shape that carries a status must carry this one)."""
        return {"error": {"message": message, "type": kind, "code": kind}}
