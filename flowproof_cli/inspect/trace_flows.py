"""A recorded trace as mitmproxy flows, each commented, for `flowproof inspect`.

The model turns come in recorded order, then each MCP server's calls in order: a trace
keeps no clock that would interleave the two. Each flow's comment says which turn and which
tools (`turn_comment`, which `run --inspect`'s tap words the same way).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from flowproof_cli.runner.listeners import LOOPBACK

if TYPE_CHECKING:
    from mitmproxy import http

    from flowproof_cli.trace import Trace

#: Hosts the flows of a trace show under: they were recorded through flowproof's listeners.
MODEL_HOST = "model"


def _path_for(protocol: str, request: Any) -> str:
    """The path the dialect answers on (Gemini's names the model, as its API does)."""
    from flowproof_cli.dialects import dialect_named  # noqa: PLC0415

    suffix = dialect_named(protocol).route_suffixes[0]
    if suffix.startswith(":"):
        model = request.get("model") if isinstance(request, dict) else None
        return f"/v1beta/models/{model or 'model'}{suffix}"
    return f"/v1/{suffix}"


def _flow(host: str, path: str, request: Any, status: int, response: Any) -> http.HTTPFlow:
    from mitmproxy import connection, http  # noqa: PLC0415 (the engine: lazy)

    now = time.time()
    client = connection.Client(peername=(LOOPBACK, 0), sockname=(LOOPBACK, 0), timestamp_start=now)
    server = connection.Server(address=(host, 80))
    flow = http.HTTPFlow(client, server)
    body = json.dumps(request, ensure_ascii=False, indent=2).encode()
    kind = "application/json"
    flow.request = http.Request.make(
        "POST", f"http://{host}{path}", body, http.Headers(content_type=kind)
    )
    answer = json.dumps(response, ensure_ascii=False, indent=2).encode()
    flow.response = http.Response.make(status, answer, http.Headers(content_type=kind))
    return flow


def turn_comment(
    number: int, protocol: str, tools: list[str], conversation: str | None = None
) -> str:
    """`turn 3, openai-chat, tools called: ...`, led in a conversation by the turn it was
    made in: `conversation turn 2 ("Then cancel it, please."): turn 3, ...`."""
    called = f"tools called: {', '.join(tools)}" if tools else "no tool called"
    said = f"turn {number}, {protocol}, {called}"
    return f"{conversation}: {said}" if conversation else said


def trace_flows(trace: Trace, source: str) -> list[http.HTTPFlow]:
    """The trace's model turns in recorded order, then each MCP server's calls in order (a
    trace keeps no clock that would interleave the two); each flow commented."""
    from flowproof_addons.conversation import (  # noqa: PLC0415
        CONVERSATION_TURN,
        MOCKED_CALL,
        MOCKED_TOOLS,
    )
    from flowproof_cli.cassette.conversation import turn_label  # noqa: PLC0415
    from flowproof_cli.evidence.trace_view import turn_views  # noqa: PLC0415

    flows = []
    for view in turn_views(trace, source):  # a TraceError names the turn it cannot read
        turn = trace.turns[view.number - 1]
        flow = _flow(
            MODEL_HOST,
            _path_for(view.protocol, turn.request),
            turn.request,
            view.status,
            view.response,
        )
        tools = [call.name for call in view.answer.tool_calls] if view.answer else []
        said = None
        if trace.conversation is not None and turn.conversation_turn is not None:
            number = turn.conversation_turn  # the recorded tag, never the position
            said = turn_label(number, trace.conversation.message(number))
            flow.metadata[CONVERSATION_TURN] = said
        flow.comment = turn_comment(view.number, view.protocol, tools, said)
        if trace.mocks:
            flow.metadata[MOCKED_TOOLS] = sorted(trace.mocks)
        flows.append(flow)
    for server in sorted(trace.mcp):
        for number, call in enumerate(trace.mcp[server].calls, start=1):
            message = {"jsonrpc": "2.0", "id": number, "method": call.method}
            if call.params is not None:
                message["params"] = call.params
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": number, **call.answer_message()}
            flow = _flow(f"mcp-{server}", "/mcp", message, call.status or 200, answer)
            mocked = " (mocked)" if call.mocked else ""
            flow.comment = f"MCP {server} call {number}, {call.label()}{mocked}"
            flow.metadata[MOCKED_CALL] = call.mocked
            flows.append(flow)
    return flows
