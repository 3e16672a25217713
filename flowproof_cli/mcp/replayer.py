"""Answering an agent from a lane: the replay state machine of one MCP server.

Transport-blind and synchronous: every client message goes into `receive`, which returns
what to send back (`Emission`s), each tagged with the channel that carries it: the answer
stream of a call (`channel` = its 0-based position) or the standalone stream (`None`). The
stdio stand-in writes all of them to stdout; the HTTP boundary routes each to the POST
answer or stream it belongs to.

Requests are matched strictly by position (method, tool name, arguments). Server-started
traffic is emitted in recorded order once its anchor is reached: `after` calls answered,
and the call it arrived `during` has arrived. A server-initiated request holds everything
behind it until the agent answers it; the answer is matched like a call. A call's answer
goes out once the server messages recorded during it are out (and, when it was answered
late at record, once as many other calls have been answered).

Faults (`faults.McpFaults`): a faulted `tools/call` must match its recorded call strictly,
then gets the fault instead of the recorded answer (an error, an `isError` result, a crash
emission, or nothing: a hang); its identical retry is served the recorded answer at the
same position. This holds whether the lane was recorded with the fault (the call's entry
names it) or without it (a fault injected at replay only).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowproof_cli.faults.plan import CRASH, Fault
from flowproof_cli.mcp.canonical import (
    PING,
    SUBSCRIPTION_ID_META,
    Kind,
    answer_of,
    canonical_request,
    error_message,
    id_key,
    is_modern,
    kind_of,
    progress_token,
    with_id,
)
from flowproof_cli.mcp.faults import Decision, McpFaults, fault_answer
from flowproof_cli.mcp.lane import Call, Lane, call_label
from flowproof_cli.mcp.matching import compare_answer, compare_call
from flowproof_cli.mcp.mocks import (
    MOCK_REFUSALS,
    lane_schemas,
    mock_answer,
    mocked_tool,
    refusal,
)

DIVERGENCE_CODE = -32099  # JSON-RPC server-error range: flowproof refused a diverged call
#: The channel of an answer that has no lane position (a ping): it goes back at once.
UNPOSITIONED = -1


@dataclass
class Emission:
    message: dict[str, Any]
    channel: int | None  # 0-based call position whose answer carries it; None: standalone
    final: bool = False  # the answer of `channel` (its stream ends after it)
    status: int | None = None  # HTTP status of an error answer recorded with one
    crash: bool = False  # a crash fault: the server dies here (stdio) / drops it (HTTP)


@dataclass
class _Arrived:
    request_id: Any
    token: Any
    mock: dict[str, Any] | None  # the spec's mocked answer, when the tool is mocked now
    at: float = 0.0  # when it arrived (CLOCK_MONOTONIC): places it in its conversation turn


class Replayer:
    def __init__(
        self,
        server: str,
        lane: Lane,
        mocks: Mapping[str, Any] | None = None,
        faults: tuple[Fault, ...] = (),
    ):
        self.server = server
        self.lane = lane
        self.mocks = dict(mocks or {})
        self.faults = McpFaults(server, faults)
        self._faulted_position: int | None = None  # the call awaiting its retry
        self.arrived: list[_Arrived] = []
        self.answered = 0
        self.divergence: str | None = None
        self.last_position: int | None = None  # position of the last request received
        #: When the call that diverged arrived (CLOCK_MONOTONIC), to name its turn.
        self.diverged_at: float | None = None
        self._responded: set[int] = set()
        self._cursor = 0  # next server event to emit
        self._waiting: int | None = None  # server request awaiting the agent's answer
        self._sent: dict[str, int] = {}  # id we gave a server request -> event index
        self._answered_events: set[int] = set()
        self._last_event: dict[int, int] = {}  # call position -> its last `during` event
        for index, event in enumerate(lane.server):
            if event.during is not None:
                self._last_event[event.during - 1] = index
        self._schemas = lane_schemas(lane)
        self._mock_calls: dict[str, int] = {}  # tool -> mocked calls answered (`results:`)

    # -- facts ---------------------------------------------------------------------------

    @property
    def negotiated(self) -> str | None:
        """The protocol version of the replayed initialize, once it was answered."""
        for position in sorted(self._responded):
            call = self.lane.calls[position] if position < len(self.lane.calls) else None
            if call is not None and call.method == "initialize" and isinstance(call.result, dict):
                version = call.result.get("protocolVersion")
                return version if isinstance(version, str) else None
        return None

    @property
    def applied(self) -> dict[str, int]:
        """fault.label -> attempts answered with it (a fault never applied is absent)."""
        return dict(self.faults.applied)

    @property
    def contacted(self) -> bool:
        return bool(self.arrived) or self.divergence is not None

    # -- the agent's messages --------------------------------------------------------------

    @property
    def arrivals(self) -> list[float]:
        """When each call served so far arrived, by position (CLOCK_MONOTONIC)."""
        return [arrived.at for arrived in self.arrived]

    def receive(self, message: Any, at: float | None = None) -> list[Emission]:
        """The answers to one message of the agent's; `at` is when it arrived (default
        now), which places it in its conversation turn."""
        kind = kind_of(message)
        if kind is Kind.REQUEST:
            return self._request(message, time.monotonic() if at is None else at)
        if kind is Kind.RESPONSE:
            return self._answer(message)
        return []  # client notifications are neither stored nor matched

    def _request(self, message: dict[str, Any], at: float) -> list[Emission]:
        if message["method"] == PING:
            self.last_position = UNPOSITIONED
            pong = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
            return [Emission(pong, UNPOSITIONED, True)]
        position = len(self.arrived)
        self.last_position = position
        method, params = canonical_request(message)
        if self.divergence is not None:
            text = f"flowproof: replay stopped after a divergence: {self.divergence}"
            return [Emission(error_message(message["id"], DIVERGENCE_CODE, text), position, True)]
        decision = self.faults.decide(method, params)
        if decision.again or decision.retry_of is not None:
            return self._faulted_again(message, decision, at)
        calls = self.lane.calls
        self.diverged_at = at  # kept only if this call diverges (`divergence` is set)
        if position >= len(calls):
            return self._diverge(
                message,
                position,
                f"an extra call ({call_label(method, params)}); the recording has "
                f"{len(calls)} call(s)",
            )
        difference = compare_call(calls[position], method, params)
        if difference is None and calls[position].fault is not None and decision.fault is None:
            difference = (
                f"it was recorded with the fault `{calls[position].fault}`, which this replay "
                "does not apply; re-record the flow"
            )
        if difference is not None:
            return self._diverge(message, position, difference)
        if decision.fault is not None:
            self._faulted_position = position
            self._responded.add(position)  # its recorded answer waits for the retry
            self.arrived.append(_Arrived(message["id"], progress_token(message), None, at))
            return [*self._fault(message, position, decision.fault), *self._advance()]
        return self._serve(message, position, at)

    def _serve(self, message: dict[str, Any], position: int, at: float) -> list[Emission]:
        """A matched call: its mock or its recorded answer, once its turn comes."""
        try:
            mock = mock_answer(message, self.mocks, self._schemas, self._mock_calls)
        except MOCK_REFUSALS as exc:  # a bad schema is checked before the agent starts
            return self._refuse(message, position, refusal(self.server, exc)[0])
        arrived = _Arrived(message["id"], progress_token(message), mock, at)
        if position < len(self.arrived):
            self.arrived[position] = arrived  # a faulted call's retry
        else:
            self.arrived.append(arrived)
        return self._advance()

    def _faulted_again(
        self, message: dict[str, Any], decision: Decision, at: float
    ) -> list[Emission]:
        """A repeated attempt of the faulted call (faulted again), or its retry (served)."""
        position = self._faulted_position
        assert position is not None  # the faults only say `again`/`retry_of` after a fault
        self.last_position = position
        if decision.fault is not None:
            return self._fault(message, position, decision.fault)
        call = self.lane.calls[position]
        if not call.answered and mocked_tool(message, self.mocks) is None:
            assert decision.retry_of is not None  # what `again`/`retry_of` are said after
            retried = decision.retry_of.label
            return self._diverge(
                message,
                position,
                f"the agent retried {call.label()} after the fault `{retried}`, and the "
                "recording has no retry of it (the agent did not retry then); re-record the flow",
            )
        self._responded.discard(position)
        return self._serve(message, position, at)

    def _fault(self, message: dict[str, Any], position: int, fault: Fault) -> list[Emission]:
        """The fault's answer to this attempt: an error or an isError result, the crash,
        or nothing at all (a hang)."""
        answer = fault_answer(fault, modern=is_modern(message))
        if answer is not None:
            return [Emission(with_id(message["id"], copy.deepcopy(answer)), position, True)]
        return [Emission({}, position, True, crash=True)] if fault.kind == CRASH else []

    def _answer(self, message: dict[str, Any]) -> list[Emission]:
        index = self._sent.pop(id_key(message["id"]), None)
        if index is None or self.divergence is not None:
            return []
        event = self.lane.server[index]
        self._answered_events.add(index)
        if self._waiting == index:
            self._waiting = None
        difference = compare_answer(event.answer, answer_of(message))
        if difference is not None:
            number = sum(1 for e in self.lane.server[: index + 1] if e.request is not None)
            self.divergence = (
                f"the MCP server '{self.server}' diverged at its request {number} "
                f"({event.method}): {difference}"
            )
            return self._stop()
        return self._advance()

    def _diverge(self, message: dict[str, Any], position: int, difference: str) -> list[Emission]:
        failure = f"the MCP server '{self.server}' diverged at call {position + 1}: {difference}"
        return self._refuse(message, position, failure)

    def _refuse(self, message: dict[str, Any], position: int, failure: str) -> list[Emission]:
        """Answer this call with `failure` and stop: every later call is refused too."""
        self.divergence = failure
        text = f"flowproof: {self.divergence}"
        answer = Emission(error_message(message["id"], DIVERGENCE_CODE, text), position, True)
        return [answer, *self._stop()]

    def _stop(self) -> list[Emission]:
        """After a divergence every open call is refused, so no stream is left hanging."""
        text = f"flowproof: replay stopped after a divergence: {self.divergence}"
        out = []
        for position, arrived in enumerate(self.arrived):
            if position not in self._responded:
                self._responded.add(position)
                message = error_message(arrived.request_id, DIVERGENCE_CODE, text)
                out.append(Emission(message, position, True))
        return out

    # -- what the server says next ---------------------------------------------------------

    def _advance(self) -> list[Emission]:
        out: list[Emission] = []
        events = self.lane.server
        progressed = True
        while progressed:
            progressed = False
            while self._cursor < len(events) and self._waiting is None:
                event = events[self._cursor]
                if self.answered < event.after:
                    break
                if event.during is not None and event.during > len(self.arrived):
                    break
                out.append(self._emit_event(self._cursor))
                self._cursor += 1
                progressed = True
            for position in range(len(self.arrived)):
                if position in self._responded or not self._ready(position):
                    continue
                out.append(self._emit_answer(position))
                progressed = True
        return out

    def _ready(self, position: int) -> bool:
        call: Call = self.lane.calls[position]
        if not call.answered and self.arrived[position].mock is None:
            return False  # never answered at record (a stream the agent closed)
        if self._last_event.get(position, -1) >= self._cursor:
            return False
        if self._waiting is not None and self.lane.server[self._waiting].during == position + 1:
            return False
        return call.settled_after is None or self.answered >= call.settled_after

    def _emit_event(self, index: int) -> Emission:
        event = self.lane.server[index]
        message: dict[str, Any] = {"jsonrpc": "2.0", **copy.deepcopy(event.message)}
        position = event.during - 1 if event.during is not None else None
        if position is not None:
            self._retag(message.get("params"), position)
        if event.request is not None:
            message["id"] = index + 1
            self._sent[id_key(index + 1)] = index
            self._waiting = index
        channel = position
        if event.stream or (channel is not None and channel in self._responded):
            channel = None
        return Emission(message, channel)

    def _emit_answer(self, position: int) -> Emission:
        arrived = self.arrived[position]
        call = self.lane.calls[position]
        answer = arrived.mock if arrived.mock is not None else call.answer_message()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": arrived.request_id}
        message.update(copy.deepcopy(answer))
        self._retag(message.get("result"), position)
        self._responded.add(position)
        self.answered += 1
        status = call.status if arrived.mock is None else None
        return Emission(message, position, True, status)

    def _retag(self, body: Any, position: int) -> None:
        """Progress tokens and subscription ids are the agent's own: use this run's."""
        if not isinstance(body, dict):
            return
        arrived = self.arrived[position]
        if "progressToken" in body and arrived.token is not None:
            body["progressToken"] = arrived.token
        meta = body.get("_meta")
        if isinstance(meta, dict) and SUBSCRIPTION_ID_META in meta:
            meta[SUBSCRIPTION_ID_META] = arrived.request_id

    # -- the verdict -------------------------------------------------------------------------

    def failures(self, variable: str | None = None) -> list[str]:
        """What is wrong once the agent is done (empty when the lane was replayed whole)."""
        if self.divergence is not None:
            return [self.divergence]
        calls = self.lane.calls
        if calls and not self.arrived and variable is not None:
            return [
                f"the agent never contacted flowproof's MCP stand-in for '{self.server}' "
                f"(the recording has {len(calls)} call(s)); its MCP config must point that "
                f"server at ${variable}"
            ]
        if len(self.arrived) < len(calls):
            missing = ", ".join(
                f"{n + 1} ({calls[n].label()})" for n in range(len(self.arrived), len(calls))
            )
            return [
                f"the MCP server '{self.server}' ran short: the agent made {len(self.arrived)} of "
                f"the {len(calls)} recorded call(s) (never made: call {missing})"
            ]
        if self._waiting is not None and self.lane.server[self._waiting].answer is not None:
            event = self.lane.server[self._waiting]
            number = sum(1 for e in self.lane.server[: self._waiting + 1] if e.request is not None)
            return [
                f"the MCP server '{self.server}' diverged at its request {number} "
                f"({event.method}): the agent never answered it"
            ]
        return []
