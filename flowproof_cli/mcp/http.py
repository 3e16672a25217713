"""The streamable-HTTP MCP boundary's request front, with mitmproxy left out.

`addons/mcp_http.py` hands each HTTP request on a server's listener to `on_request` and
gets back what to do: a whole `Reply`, a `ForwardRequest` to the real server (record), or a
`StreamReply` to serve over time from the loopback stream server (replay, and a hang
fault at record), or `Drop` (a crash fault: the connection closes unanswered). A request
the proxy would not read goes to `on_refused`, one whose handling raised to `on_exception`,
and the answer to a forwarded request to the record session (`http_upstream.py`): the
addon holds no protocol logic, only mitmproxy's hooks, the streaming switches and the
deadlines.

The front checks what every request must be whatever the mode (a method MCP knows, a JSON
body, a JSON-RPC message whose 2026-07-28 headers agree with it, a batch only where the
negotiated version allows one) and hands the rest to the session of its mode:
`http_record.HttpRecordSession` (forward and keep the lane) or
`http_replay.HttpReplaySession` (answer from the lane, zero network).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from flowproof_cli.canonical import compact_json
from flowproof_cli.mcp.canonical import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    Kind,
    batch_refusal,
    error_message,
    kind_of,
    usable_id,
)
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.mcp.sse import Channel
from flowproof_cli.mode import Mode
from flowproof_cli.quoting import could_not_handle

#: The 2026-07-28 headers that must agree with the body, and the param each mirrors.
NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ForwardRequest:
    """Record: send the request on to the real server; read its answer with `via`."""

    url: str
    via: Any = None  # the request id whose answer stream this is (None: no call)
    standalone: bool = False  # the GET stream


@dataclass
class StreamReply:
    channel: Channel


@dataclass
class Drop:
    """A crash fault: the connection is closed without an answer."""


Outcome = Reply | ForwardRequest | StreamReply | Drop


def json_reply(status: int, message: Any, headers: Mapping[str, str] | None = None) -> Reply:
    body = compact_json(message).encode()
    return Reply(status, body, {"content-type": "application/json", **(headers or {})})


def refusal_reply(
    status: int, text: str, request_id: Any = None, code: int = INVALID_REQUEST
) -> Reply:
    return json_reply(status, error_message(request_id, code, f"flowproof: {text}"))


def header(headers: Mapping[str, str], name: str) -> str:
    """The value of header `name` (lower case), whatever case the client sent it in."""
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


def accepts_sse(headers: Mapping[str, str]) -> bool:
    accept = header(headers, "accept").lower()
    return "text/event-stream" in accept or "*/*" in accept


def header_mismatch(message: dict[str, Any], headers: Mapping[str, str]) -> str | None:
    """2026-07-28: `Mcp-Method` / `Mcp-Name` must say what the body says."""
    said = header(headers, "mcp-method")
    if said and "method" in message and said != message["method"]:
        return f"the Mcp-Method header says {said}, the body says {message['method']}"
    name = header(headers, "mcp-name")
    param = NAME_PARAMS.get(str(message.get("method")))
    params = message.get("params")
    if name and param and isinstance(params, dict) and params.get(param) != name:
        return f"the Mcp-Name header says {name}, the body says {params.get(param)}"
    return None


class HttpMcpSession(ABC):
    """One MCP server behind one listener, for one flow: the front both modes share."""

    mode: ClassVar[Mode]

    def __init__(self, server: str, mocks: Mapping[str, Any] | None = None):
        self.server = server
        self.mocks = dict(mocks or {})
        self.mock_calls: dict[str, int] = {}  # tool -> mocked calls answered (`results:`)
        self.requests = 0
        self.errors: list[str] = []  # what fails the flow whatever the agent did with it

    @property
    def contacted(self) -> bool:
        return self.requests > 0

    def on_request(
        self, method: str, headers: Mapping[str, str], body: bytes, path: str = "/mcp"
    ) -> Outcome:
        """What to do with one request. Whatever goes wrong is a refusal that fails the flow,
        never an exception: one escaping the proxy's hook would let the request go on."""
        self.requests += 1
        try:
            return self._handle(method, headers, body)
        except Exception as exc:  # any input, any bug: an answer, never an exception
            return self.on_exception(path, exc)

    def on_refused(self, text: str, status: int) -> Reply:
        """A request the proxy would not read (its body's encoding): counted as one the
        agent made, refused, and the flow fails."""
        self.requests += 1
        return self.refuse(text, status=status)

    def on_exception(self, path: str, exc: Exception) -> Reply:
        """Handling the request to `path` raised: a named 500 that fails the flow (the
        request is refused, never forwarded)."""
        return self.refuse(could_not_handle(path, exc), status=500, code=INTERNAL_ERROR)

    def _handle(self, method: str, headers: Mapping[str, str], body: bytes) -> Outcome:
        if method == "GET":
            return self._get(headers)
        if method == "DELETE":
            return self._delete()
        if method != "POST":
            return Reply(405, b"", {"allow": "GET, POST, DELETE"})
        try:
            message = json.loads(body or b"null")
        except RecursionError:  # an exception like any other (500), worded for what it is
            too_deep = "the body is JSON nested too deeply to read"
            return self.refuse(too_deep, status=500, code=PARSE_ERROR)
        except ValueError:
            return self.refuse("the body is not JSON", code=PARSE_ERROR)
        if isinstance(message, list):
            text = batch_refusal(self.negotiated)
            return self._batch(message) if text is None else self.refuse(text)
        if kind_of(message) is Kind.INVALID:
            return self.refuse("the body is not a JSON-RPC message", request_id=usable_id(message))
        mismatch = header_mismatch(message, headers)
        if mismatch is not None:
            return self.refuse(mismatch, request_id=message.get("id"))
        return self._message(message, headers)

    def refuse(
        self, text: str, *, status: int = 400, code: int = INVALID_REQUEST, request_id: Any = None
    ) -> Reply:
        """A refusal that fails the flow too (the agent is told why)."""
        self.fail(text)
        return refusal_reply(status, text, request_id, code)

    def fail(self, text: str) -> None:
        """The flow fails, naming this server (the backstop refused a request on its
        listener, the record could not read what the real server sent)."""
        self.errors.append(f"the MCP server '{self.server}': {text}")

    # -- what each mode does -------------------------------------------------------------

    @property
    @abstractmethod
    def negotiated(self) -> str | None:
        """The protocol version agreed at initialize, once it was."""

    @abstractmethod
    def _get(self, headers: Mapping[str, str]) -> Outcome: ...

    @abstractmethod
    def _delete(self) -> Outcome: ...

    @abstractmethod
    def _batch(self, batch: list[Any]) -> Outcome:
        """A batch the negotiated version allows."""

    @abstractmethod
    def _message(self, message: dict[str, Any], headers: Mapping[str, str]) -> Outcome:
        """One valid JSON-RPC message."""

    # -- what the runner reads once the agent is done ------------------------------------

    @abstractmethod
    def lane(self) -> Lane:
        """Record: the lane recorded; replay: the lane served."""

    @abstractmethod
    def calls(self) -> int:
        """Requests the agent made (pings and notifications left out)."""

    @property
    @abstractmethod
    def divergence(self) -> str | None:
        """Replay: where the agent left the lane."""

    @property
    @abstractmethod
    def applied(self) -> dict[str, int]:
        """fault.label -> attempts answered with it."""

    @abstractmethod
    def failures(self) -> list[str]:
        """Replay: the lane replayed short, a request never answered."""

    @abstractmethod
    def close(self) -> None:
        """Nothing of the session stays open (replay: its stream connections)."""
