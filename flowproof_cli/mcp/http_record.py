"""Record over streamable HTTP: forward to the real server, read both sides into a lane.

Every POST, GET and DELETE goes to the real url with the agent's headers (Authorization
and Mcp-Session-Id pass through, neither is stored); answers, JSON or SSE, go back to the
agent as the server sent them while the addon hands them to `http_upstream.py`, which
reads each message into the lane.
A mocked `tools/call` is answered here and never forwarded, and so is a faulted attempt
(`mcp/faults.py`): an error or an `isError` result, a dropped connection (crash), or an SSE
answer that never says anything (hang, closed with the session).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowproof_cli.cassette.upstream import DEFAULT_UPSTREAM_TIMEOUT_S
from flowproof_cli.faults.plan import CRASH, Fault
from flowproof_cli.mcp.call_bound import CallBound
from flowproof_cli.mcp.canonical import (
    Kind,
    canonical_request,
    is_modern,
    kind_of,
    with_id,
)
from flowproof_cli.mcp.faults import Decision, McpFaults, fault_answer
from flowproof_cli.mcp.http import (
    Drop,
    ForwardRequest,
    Outcome,
    Reply,
    StreamReply,
    json_reply,
)
from flowproof_cli.mcp.http_upstream import ForwardingSession
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.mcp.mocks import (
    MOCK_REFUSALS,
    mock_answer,
    mocked_tool,
    output_schemas,
    refusal,
)
from flowproof_cli.mcp.sse import Channel
from flowproof_cli.mode import Mode


class HttpRecordSession(ForwardingSession):
    """What the agent sent, at record; what the real server sent is `ForwardingSession`'s."""

    mode = Mode.RECORD

    def __init__(
        self,
        server: str,
        *,
        url: str,
        mocks: Mapping[str, Any] | None = None,
        bound: CallBound | None = None,
        faults: tuple[Fault, ...] = (),
    ):
        bound = bound or CallBound(DEFAULT_UPSTREAM_TIMEOUT_S)
        super().__init__(server, url=url, mocks=mocks, bound=bound)
        self.faults = McpFaults(server, faults)
        self._hanging: list[Channel] = []

    @property
    def negotiated(self) -> str | None:
        return self.recorder.negotiated

    # -- what the agent sent -------------------------------------------------------------

    def _get(self, headers: Mapping[str, str]) -> Outcome:
        return ForwardRequest(self.url, standalone=True)

    def _delete(self) -> Outcome:
        return ForwardRequest(self.url)

    def _batch(self, batch: list[Any]) -> Outcome:
        if any(isinstance(m, dict) and mocked_tool(m, self.mocks) for m in batch):
            return self.refuse("a mocked tool cannot be called inside a JSON-RPC batch")
        decisions = [
            self.faults.decide(*canonical_request(m)) if kind_of(m) is Kind.REQUEST else Decision()
            for m in batch
        ]
        faulted = next((d.fault for d in decisions if d.fault is not None), None)
        if faulted is not None:
            return self.refuse(f"the fault `{faulted.label}` hit a call inside a JSON-RPC batch")
        for element, decision in zip(batch, decisions, strict=True):
            retry_of = decision.retry_of.label if decision.retry_of is not None else None
            self.recorder.client(element, retry_of=retry_of)
        return ForwardRequest(self.url)

    def _message(self, message: dict[str, Any], headers: Mapping[str, str]) -> Outcome:
        request = kind_of(message) is Kind.REQUEST
        decision = self.faults.decide(*canonical_request(message)) if request else Decision()
        if decision.fault is not None:
            return self._faulted(message, decision.fault)
        retry_of = decision.retry_of.label if decision.retry_of is not None else None
        if mocked_tool(message, self.mocks) is not None:
            return self._mocked(message, retry_of)
        self.recorder.client(message, retry_of=retry_of)
        return ForwardRequest(self.url, via=message["id"] if request else None)

    def _faulted(self, message: dict[str, Any], fault: Fault) -> Outcome:
        """A faulted attempt, never forwarded: kept in the lane with what it got."""
        answer = fault_answer(fault, modern=is_modern(message))
        self.recorder.client(message, fault=fault.label, fault_answer=answer)
        if answer is not None:
            return json_reply(200, with_id(message["id"], answer))
        if fault.kind == CRASH:
            return Drop()
        channel = Channel()
        self._hanging.append(channel)  # a hang: open, silent, closed with the session
        return StreamReply(channel)

    def _mocked(self, message: dict[str, Any], retry_of: str | None = None) -> Reply:
        """A mocked tool call, answered here (the tools/list scan only for a mock)."""
        lists = (c.result for c in self.recorder.lane.calls if c.method == "tools/list")
        try:
            answer = mock_answer(message, self.mocks, output_schemas(lists), self.mock_calls)
        except MOCK_REFUSALS as exc:  # the flow fails; the agent gets an error
            text, answer = refusal(self.server, exc)
            self.errors.append(text)
        assert answer is not None
        self.recorder.client(message, mocked=True, retry_of=retry_of)
        reply = with_id(message["id"], answer)
        self.recorder.server(reply)
        return json_reply(200, reply)

    # -- what the runner reads -----------------------------------------------------------

    def lane(self) -> Lane:
        return self.recorder.lane

    def calls(self) -> int:
        return len(self.recorder.lane.calls)

    @property
    def divergence(self) -> str | None:
        return None  # nothing to diverge from at record

    def failures(self) -> list[str]:
        return []

    @property
    def applied(self) -> dict[str, int]:
        return dict(self.faults.applied)

    def close(self) -> None:
        """The hang faults' silent answers end; the connections to the real server are
        mitmproxy's."""
        for channel in self._hanging:
            channel.close()
