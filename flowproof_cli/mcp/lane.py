"""A lane: the recorded traffic of one MCP server, transport-blind.

Two ordered lists. `calls` are the agent's requests in arrival order, each with the answer
it got; they are what replay MATCHES, strictly by position. `server` is what the server
started by itself: notifications and server-initiated requests (with the agent's answer),
each anchored to the point it crossed; anchors are REPLAYED (they say when to emit), never
matched. The same lane serves stdio and streamable HTTP: nothing in it is a transport
detail (no request ids, no session ids, no HTTP status of a plain answer).

    calls:
      - method: tools/call
        params: {name: read_file, arguments: {path: a.txt}}   # canonical, see canonical.py
        result: {...}          # or `error: {code, message}`; neither: never answered
        mocked: true           # answered by flowproof from the spec, never forwarded
        settled_after: 3       # answered only once 3 other calls had been answered
        status: 400            # HTTP status of an error answer, when it was not 200
        conversation_turn: 2   # a conversation's: the turn open when the agent made it
        fault: "mcp notes call 2: tool_error: down"   # its first attempts got this fault
        fault_answer: {result: {...}}   # ... answered so (absent: a crash or a hang); then
                               # `result`/`error` is what its identical retry got (absent:
                               # the agent never retried it)
    server:
      - after: 2               # calls answered when it crossed
        during: 3              # 1-based call pending when it crossed (emitted after it arrives)
        stream: true           # it came on the standalone stream, not inline in call 3's answer
        notification: {method: notifications/progress, params: {...}}
      - after: 2
        during: 3
        request: {method: sampling/createMessage, params: {...}}
        answer: {result: {...}}   # the agent's answer, matched at replay
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flowproof_cli.canonical import sorted_keys
from flowproof_cli.errors import TraceError


def call_label(method: str, params: Any) -> str:
    """`tools/call <name>` for a tool call, else the method."""
    name = params.get("name") if isinstance(params, dict) else None
    return f"{method} {name}" if method == "tools/call" and isinstance(name, str) else method


@dataclass
class Call:
    method: str
    params: dict[str, Any] | None = None
    result: Any = None
    error: Any = None
    answered: bool = False  # result or error is set (a `null` result is an answer)
    mocked: bool = False
    settled_after: int | None = None
    status: int | None = None
    #: A conversation's: the turn the agent made the call in (None: a one-turn flow).
    conversation_turn: int | None = None
    #: The label of the fault its first attempts got (`faults.plan.Fault.label`), and the
    #: answer they got (None: a crash or a hang). Its own answer is then the retry's.
    fault: str | None = None
    fault_answer: dict[str, Any] | None = None
    #: When it reached flowproof (CLOCK_MONOTONIC, comparable across processes); not stored.
    arrived_at: float | None = field(default=None, compare=False, repr=False)

    @property
    def tool(self) -> str | None:
        name = self.params.get("name") if isinstance(self.params, dict) else None
        return name if self.method == "tools/call" and isinstance(name, str) else None

    def answer_message(self) -> dict[str, Any]:
        """The JSON-RPC answer without id (the replying side adds the agent's id)."""
        if self.error is not None:
            return {"error": self.error}
        return {"result": self.result}

    def label(self) -> str:
        return call_label(self.method, self.params)


@dataclass
class ServerEvent:
    after: int
    notification: dict[str, Any] | None = None
    request: dict[str, Any] | None = None
    answer: dict[str, Any] | None = None  # {"result": ...} or {"error": ...}
    during: int | None = None  # 1-based call number
    stream: bool = False

    @property
    def message(self) -> dict[str, Any]:
        return self.request if self.request is not None else (self.notification or {})

    @property
    def method(self) -> str:
        return str(self.message.get("method", ""))


@dataclass
class Lane:
    calls: list[Call] = field(default_factory=list)
    server: list[ServerEvent] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.calls and not self.server


def lane_to_document(lane: Lane) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    for call in lane.calls:
        entry: dict[str, Any] = {"method": call.method}
        if call.params is not None:
            entry["params"] = sorted_keys(call.params)
        if call.answered:
            if call.error is not None:
                entry["error"] = sorted_keys(call.error)
            else:
                entry["result"] = sorted_keys(call.result)
        if call.mocked:
            entry["mocked"] = True
        if call.settled_after is not None:
            entry["settled_after"] = call.settled_after
        if call.status is not None:
            entry["status"] = call.status
        if call.conversation_turn is not None:
            entry["conversation_turn"] = call.conversation_turn
        if call.fault is not None:
            entry["fault"] = call.fault
            if call.fault_answer is not None:
                entry["fault_answer"] = sorted_keys(call.fault_answer)
        calls.append(entry)
    events: list[dict[str, Any]] = []
    for event in lane.server:
        item: dict[str, Any] = {"after": event.after}
        if event.during is not None:
            item["during"] = event.during
        if event.stream:
            item["stream"] = True
        if event.request is not None:
            item["request"] = sorted_keys(event.request)
            if event.answer is not None:
                item["answer"] = sorted_keys(event.answer)
        else:
            item["notification"] = sorted_keys(event.notification)
        events.append(item)
    document: dict[str, Any] = {"calls": calls}
    if events:
        document["server"] = events
    return document


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} is not an integer")
    return value


def _text(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{what} is not text")
    return value


def _mapping(value: Any, what: str) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"{what} is not a mapping")
    return value


def _shape_problem(document: Any) -> str | None:
    """What the reader would trip on before naming a call: the lists and the methods."""
    if not isinstance(document, dict):
        return f"it is a {type(document).__name__}, not a mapping with `calls`"
    for key in ("calls", "server"):
        if document.get(key) is not None and not isinstance(document[key], list):
            return f"`{key}` must be a list, got {type(document[key]).__name__}"
    for number, call in enumerate(document.get("calls") or [], start=1):
        if not isinstance(call, dict) or not isinstance(call.get("method"), str):
            return f"call {number} is malformed: it needs a `method` (text)"
    return None


def lane_from_document(document: Any, source: str) -> Lane:
    """A lane from its trace document; TraceError naming `source` and what is wrong."""
    problem = _shape_problem(document)
    if problem is not None:
        raise TraceError(f"{source} is malformed: {problem}")
    lane = Lane()
    for number, entry in enumerate(document.get("calls") or [], start=1):
        try:
            params = entry.get("params")
            if params is not None and not isinstance(params, dict):
                raise TypeError("params is not a mapping")
            answered = "result" in entry or "error" in entry
            lane.calls.append(
                Call(
                    method=str(entry["method"]),
                    params=params,
                    result=entry.get("result"),
                    error=entry.get("error"),
                    answered=answered,
                    mocked=bool(entry.get("mocked", False)),
                    settled_after=(
                        _int(entry["settled_after"], "settled_after")
                        if "settled_after" in entry
                        else None
                    ),
                    status=_int(entry["status"], "status") if "status" in entry else None,
                    conversation_turn=(
                        _int(entry["conversation_turn"], "conversation_turn")
                        if "conversation_turn" in entry
                        else None
                    ),
                    fault=_text(entry.get("fault"), "fault"),
                    fault_answer=_mapping(entry.get("fault_answer"), "fault_answer"),
                )
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise TraceError(f"{source}: call {number} is malformed ({exc})") from exc
    for number, entry in enumerate(document.get("server") or [], start=1):
        try:
            request = entry.get("request")
            notification = entry.get("notification")
            if (request is None) == (notification is None):
                raise TypeError("needs exactly one of `request` and `notification`")
            if not isinstance(request or notification, dict):
                raise TypeError("the message is not a mapping")
            during = entry.get("during")
            lane.server.append(
                ServerEvent(
                    after=_int(entry["after"], "after"),
                    notification=notification,
                    request=request,
                    answer=entry.get("answer"),
                    during=_int(during, "during") if during is not None else None,
                    stream=bool(entry.get("stream", False)),
                )
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise TraceError(f"{source}: server message {number} is malformed ({exc})") from exc
    return lane
