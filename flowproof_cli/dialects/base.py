"""The contract every model wire dialect implements.

A dialect knows one API's JSON shapes and nothing about files, HTTP servers or matching:
it turns a request body into its canonical form, rewrites mocked tool results, extracts the
assistant's tool calls and text, outlines a request for divergence reports, and renders a
recorded response back to the client (as JSON or as a synthesized SSE stream).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from flowproof_cli.trajectory import AssistantTurn

JSON = dict[str, Any]

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


@dataclass(frozen=True)
class Rendered:
    """A response ready to send to the client."""

    status: int
    content_type: str
    body: bytes


class Dialect(ABC):
    """One model API wire format."""

    #: Stable tag stored on each turn of the cassette.
    name: str
    #: Path suffixes this dialect answers (matched on the last segments of the path).
    route_suffixes: tuple[str, ...]
    #: The request field holding the conversation (messages, input items, contents).
    conversation_key: str
    #: Request fields carrying the system prompt beside the conversation (the outline shows
    #: them as its first entry, not as parameters).
    system_fields: tuple[str, ...] = ()
    #: The provider whose record upstream and key it uses (`FLOWPROOF_UPSTREAM_<PROVIDER>`).
    provider: str = "openai"
    #: Record signs each forwarded request (AWS SigV4, `cassette/aws_signing.py`) with
    #: flowproof's own credentials instead of sending a key.
    signs_upstream: bool = False

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

    def upstream_body(self, body: JSON) -> JSON:
        """What record forwards upstream: always non-streaming, so record and replay
        serve the same synthesized bytes."""
        return without_transport(body)

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        """A JSON error in the dialect's own error shape, for an answer with HTTP `status`
        (a shape that carries a status must carry this one)."""
        return {"error": {"message": message, "type": kind, "code": kind}}
