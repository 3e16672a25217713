"""Building a lane from the messages that crossed one MCP server's boundary at record.

Fed in arrival order, from either transport: `client()` for what the agent sent, `server()`
for what the server sent. `instance` tells apart concurrent connections to the same server
(two stand-in processes, two HTTP sessions) so their request ids never collide.

A faulted attempt (`fault`: the label, `fault_answer`: what flowproof answered) is never
forwarded: the first one of a call makes its lane entry, repeats add nothing; its identical
retry (`retry_of`: the label) is that same entry's call, its answer the entry's answer.

Attribution of server-started traffic: `via` is the id of the request whose answer
stream carried it (HTTP); without it (stdio, the standalone stream) a progress token or
subscription id names the call, else the most recently sent pending call of the same
connection, else none.
"""

from __future__ import annotations

import time
from typing import Any

from flowproof_cli.mcp.canonical import (
    PING,
    PROGRESS,
    SUBSCRIPTION_ID_META,
    Kind,
    answer_of,
    canonical_request,
    id_key,
    kind_of,
    progress_token,
)
from flowproof_cli.mcp.lane import Call, Lane, ServerEvent
from flowproof_cli.quoting import quoted

_QUOTE_LIMIT = 200


def quote_line(raw: bytes | str) -> str:
    """What a server sent, as an error message may show it: its line break dropped, escaped,
    clipped."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return quoted(text.rstrip("\r\n"), _QUOTE_LIMIT)


def is_json_rpc(message: Any) -> bool:
    """A JSON-RPC message, or a non-empty batch of them."""
    elements = message if isinstance(message, list) else [message]
    return bool(elements) and all(kind_of(element) is not Kind.INVALID for element in elements)


def _event_message(message: dict[str, Any]) -> dict[str, Any]:
    return {key: message[key] for key in ("method", "params") if key in message}


class LaneRecorder:
    def __init__(self) -> None:
        self.lane = Lane()
        self.answered = 0
        self.negotiated: str | None = None  # protocol version agreed at initialize
        self._pending: dict[tuple[str, str], int] = {}  # (instance, id) -> call index
        self._arrival: dict[int, int] = {}  # call index -> calls answered when it arrived
        self._instance_of: dict[int, str] = {}
        self._ids: dict[int, Any] = {}
        self._tokens: dict[int, Any] = {}
        self._server_requests: dict[tuple[str, str], int] = {}  # (instance, id) -> event
        self._faulted: dict[str, int] = {}  # fault label -> call index

    # -- what the agent sent ---------------------------------------------------------

    def client(
        self,
        message: Any,
        *,
        instance: str = "",
        mocked: bool = False,
        at: float | None = None,
        fault: str | None = None,
        fault_answer: dict[str, Any] | None = None,
        retry_of: str | None = None,
    ) -> int | None:
        """Record one client message; the 0-based call index of a request, else None. `at`
        is when it arrived (CLOCK_MONOTONIC; default now), which places it in its
        conversation turn."""
        kind = kind_of(message)
        if kind is Kind.REQUEST and message["method"] != PING:
            if fault is not None:
                return self._faulted_attempt(message, fault, fault_answer, at)
            position = self._faulted.get(retry_of) if retry_of is not None else None
            if position is None:
                method, params = canonical_request(message)
                position = len(self.lane.calls)
                arrived_at = time.monotonic() if at is None else at
                call = Call(method=method, params=params, mocked=mocked, arrived_at=arrived_at)
                self.lane.calls.append(call)
            else:
                self.lane.calls[position].mocked = mocked
            self._pending[(instance, id_key(message["id"]))] = position
            self._arrival[position] = self.answered
            self._instance_of[position] = instance
            self._ids[position] = message["id"]
            self._tokens[position] = progress_token(message)
            return position
        if kind is Kind.RESPONSE:
            event = self._server_requests.pop((instance, id_key(message["id"])), None)
            if event is not None:
                self.lane.server[event].answer = answer_of(message)
        return None

    def _faulted_attempt(
        self, message: Any, label: str, answer: dict[str, Any] | None, at: float | None
    ) -> int:
        """A faulted attempt: the first makes the call's entry, a repeat adds nothing."""
        position = self._faulted.get(label)
        if position is None:
            method, params = canonical_request(message)
            position = len(self.lane.calls)
            arrived_at = time.monotonic() if at is None else at
            self.lane.calls.append(
                Call(method, params, fault=label, fault_answer=answer, arrived_at=arrived_at)
            )
            self._faulted[label] = position
        return position

    def position_of(self, request_id: Any, *, instance: str = "") -> int | None:
        """The 0-based call index of a request still waiting for its answer, else None."""
        return self._pending.get((instance, id_key(request_id)))

    def label_of(self, request_id: Any, *, instance: str = "") -> str:
        """What a pending call is, for a message about its answer (`call N (method)`)."""
        position = self._pending.get((instance, id_key(request_id)))
        if position is None:
            return "a message" if request_id is None else f"request {request_id!r}"
        return f"call {position + 1} ({self.lane.calls[position].label()})"

    # -- what the server sent --------------------------------------------------------

    def server(
        self,
        message: Any,
        *,
        instance: str = "",
        via: Any = None,
        stream: bool = False,
        status: int | None = None,
    ) -> None:
        kind = kind_of(message)
        if kind is Kind.RESPONSE:
            self._answer(message, instance, status)
        elif kind is Kind.NOTIFICATION or (kind is Kind.REQUEST and message["method"] != PING):
            during = self._attribute(message, instance, via)
            event = ServerEvent(
                after=self.answered,
                during=during + 1 if during is not None else None,
                stream=stream,
            )
            if kind is Kind.REQUEST:
                event.request = _event_message(message)
                self._server_requests[(instance, id_key(message["id"]))] = len(self.lane.server)
            else:
                event.notification = _event_message(message)
            self.lane.server.append(event)

    def _answer(self, message: dict[str, Any], instance: str, status: int | None) -> None:
        position = self._pending.pop((instance, id_key(message["id"])), None)
        if position is None:
            return  # an answer to nothing pending (a cancelled call, a duplicate)
        call = self.lane.calls[position]
        answer = answer_of(message)
        call.answered = True
        call.result = answer.get("result")
        call.error = answer.get("error")
        if status is not None and status != 200 and call.error is not None:
            call.status = status
        if self.answered > self._arrival[position]:
            call.settled_after = self.answered
        self.answered += 1
        if call.method == "initialize" and isinstance(call.result, dict):
            version = call.result.get("protocolVersion")
            self.negotiated = version if isinstance(version, str) else self.negotiated

    def _attribute(self, message: dict[str, Any], instance: str, via: Any) -> int | None:
        if via is not None:
            position = self._pending.get((instance, id_key(via)))
            if position is not None:
                return position
        pending = [p for (inst, _), p in self._pending.items() if inst == instance]
        raw_params = message.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        token = params.get("progressToken") if message.get("method") == PROGRESS else None
        if token is not None:
            for position in pending:
                if self._tokens.get(position) == token:
                    return position
        meta = params.get("_meta")
        if isinstance(meta, dict) and SUBSCRIPTION_ID_META in meta:
            for position in pending:
                if self._ids.get(position) == meta[SUBSCRIPTION_ID_META]:
                    return position
        return max(pending) if pending else None
