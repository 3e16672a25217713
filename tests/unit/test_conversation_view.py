"""The conversation content view (addons/conversation.py) on real recorded bodies, and the
flows `flowproof inspect` builds from a trace (flowproof_cli/inspect/trace_flows.py).

Bodies come from the committed traces; streamed answers are the SSE streams the dialects
themselves synthesize from those recordings. mitmproxy's own registry picks the view, as
mitmweb does, so "the default view" is tested the way it is used.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mitmproxy import contentviews, http
from mitmproxy.contentviews import Metadata, make_metadata
from mitmproxy.io import FlowReader
from mitmproxy.test import taddons, tflow

from flowproof_addons import conversation
from flowproof_addons.conversation import MOCKED_TOOLS, VIEW, VIEW_NAME, ConversationViews
from flowproof_cli import trace as traces
from flowproof_cli.dialects import dialect_named
from flowproof_cli.errors import TraceError
from flowproof_cli.inspect.live import FlowTap
from flowproof_cli.inspect.trace_flows import trace_flows
from flowproof_cli.inspect.web_view import frame
from tests.conftest import REPO

DIALECT_TRACES = {
    "openai-chat": "specs/chat.trace.yaml",
    "openai-responses": "specs/responses.trace.yaml",
    "anthropic": "specs/anthropic.trace.yaml",
    "gemini": "specs/gemini.trace.yaml",
}
ALL_TRACES = sorted(
    str(path.relative_to(REPO))
    for path in [*REPO.glob("specs/*.trace.yaml"), *REPO.glob("examples/**/*.trace.yaml")]
)
#: What turn 2 of each weather trace sends and gets: the city, the first tool's result, the
#: mocked tool, and the reply.
CITIES = {
    "openai-chat": "Kyoto",
    "openai-responses": "Lima",
    "anthropic": "Oslo",
    "gemini": "Accra",
}


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    """mitmproxy's options (make_metadata reads one) and the view in the registry."""
    with taddons.context(ConversationViews()):
        yield


def flows_of(relative: str) -> list[http.HTTPFlow]:
    return trace_flows(traces.load(REPO / relative), relative)


def shown(message: http.Message, flow: http.HTTPFlow) -> contentviews.ContentviewResult:
    return contentviews.prettify_message(message, flow)


def lines_shown(message: http.Message, flow: http.HTTPFlow) -> list[str]:
    """The lines the conversation view shows for `message` (it must be the view that shows it)."""
    result = shown(message, flow)
    assert result.view_name == VIEW_NAME
    return result.text.splitlines()


def streamed(flow: http.HTTPFlow) -> http.HTTPFlow:
    """The flow with its response as the SSE stream the dialect serves for it."""
    copy = flow.copy()
    dialect = dialect_named(_protocol(flow))
    assert copy.response is not None
    request, response = json.loads(flow.request.content or b""), json.loads(copy.response.text)
    rendered = dialect.render(request, 200, response, stream=True)
    copy.response.content = rendered.body
    copy.response.headers["content-type"] = rendered.content_type
    return copy


def _protocol(flow: http.HTTPFlow) -> str:
    return flow.comment.split(", ")[1]


# -- green paths ----------------------------------------------------------------------------------


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_every_committed_body_is_read_by_the_conversation_view(relative: str) -> None:
    flows = flows_of(relative)
    assert flows, relative
    for flow in flows:
        for message in (flow.request, flow.response):
            assert message is not None
            result = shown(message, flow)
            assert result.view_name == VIEW_NAME, (relative, flow.comment)
            assert "not a conversation" not in result.text


@pytest.mark.parametrize("protocol", sorted(DIALECT_TRACES))
def test_a_second_turn_reads_as_the_conversation(protocol: str) -> None:
    first, second = flows_of(DIALECT_TRACES[protocol])
    city = CITIES[protocol]
    request = shown(second.request, second).text
    assert request.startswith(f"{protocol} request, model ")
    assert "system: You are a weather assistant. Use the tools" in request
    assert f"user: What's the weather in {city} right now? Use both tools." in request
    assert "-> calls get_weather" in request and city in request
    assert "get_weather result: " in request and "sunny" in request
    assert "get_time result (mocked): " in request
    assert second.response is not None and first.response is not None
    reply = shown(second.response, second).text
    assert f"reply:\n    The weather in {city} is sunny." in reply
    calls = shown(first.response, first).text
    assert "-> calls get_weather " in calls and city in calls
    assert "-> calls get_time {}" in calls


@pytest.mark.parametrize("protocol", sorted(DIALECT_TRACES))
def test_a_streamed_answer_reads_as_the_same_answer(protocol: str) -> None:
    for flow in flows_of(DIALECT_TRACES[protocol]):
        stream = streamed(flow)
        assert stream.response is not None and flow.response is not None
        whole = shown(flow.response, flow).text.splitlines()
        events = shown(stream.response, stream).text.splitlines()
        assert "reassembled from" in events[0] and "SSE events" in events[0]
        assert events[1:] == whole[1:]


def test_mcp_calls_read_by_method_and_tool() -> None:
    flows = [flow for flow in flows_of("specs/mcp.trace.yaml") if "/mcp" in flow.request.path]
    texts = [(shown(f.request, f).text, shown(f.response, f).text) for f in flows]  # type: ignore[arg-type]
    assert texts[1][1].endswith(
        "7 tool(s): read_note, write_note, slow_count, confirm_write, "
        "summarize_note, list_client_roots, touch_note"
    )
    sent, got = texts[2]
    assert sent.endswith('-> request #3: tools/call write_note {"name": "a.txt", "text": "hello"}')
    assert got.endswith("<- result #3: wrote 5 bytes to a.txt")
    assert texts[3][1].endswith("<- result #4: hello")


def test_an_mcp_answer_on_sse_and_a_mocked_call_are_read() -> None:
    flow = tflow.tflow(resp=True)
    flow.request.path = "/mcp"
    flow.request.content = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t"}}'
    )
    result = {"content": [{"type": "text", "text": "done"}]}
    flow.response.content = (
        b"event: message\ndata: %s\n\n"
        % json.dumps({"jsonrpc": "2.0", "id": 7, "result": result}).encode()
    )
    flow.response.headers["content-type"] = "text/event-stream"
    flow.metadata[conversation.MOCKED_CALL] = True
    assert shown(flow.request, flow).text.endswith("-> request #7: tools/call t {}")
    assert lines_shown(flow.response, flow) == [
        "MCP answer, 1 SSE message(s)",
        "",
        "<- result #7 (mocked): done",
    ]


def test_mocked_results_are_marked_only_when_the_metadata_names_the_tool() -> None:
    _, second = flows_of("specs/chat.trace.yaml")
    second.metadata.pop(MOCKED_TOOLS)
    text = shown(second.request, second).text
    assert "get_time result: " in text and "(mocked)" not in text


def test_loading_the_model_addon_registers_the_view_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flowproof_addons import mcp_http, model

    fresh = type(contentviews.registry)()  # an empty registry: nothing registered yet
    monkeypatch.setattr(contentviews, "registry", fresh)
    views = [a for a in (*model.addons, *mcp_http.addons) if isinstance(a, ConversationViews)]
    assert len({view.name for view in views}) == 2  # both load into one mitmweb side by side
    assert VIEW_NAME not in fresh
    with taddons.context(*views):
        assert fresh[VIEW_NAME] is VIEW
        assert list(fresh) == [VIEW_NAME]


# -- the flows of `flowproof inspect` ------------------------------------------------------------


#: The comments of specs/mcp.trace.yaml's flows, in recorded order (also what inspect serves).
MCP_TRACE_COMMENTS = [
    "turn 1, openai-chat, tools called: write_note",
    "turn 2, openai-chat, tools called: read_note",
    "turn 3, openai-chat, no tool called",
    "MCP notes call 1, server/discover",
    "MCP notes call 2, tools/list",
    "MCP notes call 3, tools/call write_note",
    "MCP notes call 4, tools/call read_note",
]


def test_a_trace_becomes_flows_in_recorded_order_each_commented() -> None:
    flows = flows_of("specs/mcp.trace.yaml")
    assert [flow.comment for flow in flows] == MCP_TRACE_COMMENTS
    assert [flow.request.pretty_host for flow in flows][:4] == ["model"] * 3 + ["mcp-notes"]


def test_gemini_turns_get_the_model_in_their_path() -> None:
    flow = flows_of("specs/gemini.trace.yaml")[0]
    assert flow.request.path == "/v1beta/models/gemini-2.5-flash:generateContent"


def test_a_flow_frame_reads_back_with_its_comment_and_flowproof_metadata_only() -> None:
    flow = flows_of("specs/chat.trace.yaml")[1]
    flow.metadata["flowproof_mcp_forward"] = object()  # a live boundary's: not portable
    flow.metadata["other"] = "not flowproof's"
    (read,) = FlowReader(io.BytesIO(frame(flow))).stream()
    assert read.comment == flow.comment
    assert read.metadata == {MOCKED_TOOLS: ["get_time"]}
    assert read.request.content == flow.request.content


class _Sink:
    def __init__(self) -> None:
        self.fed: list[http.HTTPFlow] = []

    def feed(self, flow: http.HTTPFlow) -> None:
        self.fed.append(flow)


def test_the_live_tap_numbers_turns_per_listener_and_keeps_the_boundary_comment() -> None:
    sink = _Sink()
    tap = FlowTap(sink)  # type: ignore[arg-type]
    first, second = flows_of("specs/chat.trace.yaml")
    for flow in (first, second):
        flow.comment = "flowproof: answered from the trace"
        tap.response(flow)
    assert [flow.comment for flow in sink.fed] == [
        "turn 1, openai-chat, tools called: get_weather, get_time; flowproof: answered from the trace",
        "turn 2, openai-chat, no tool called; flowproof: answered from the trace",
    ]


# -- red paths ------------------------------------------------------------------------------------


def _flow(path: str, body: bytes, content_type: str) -> http.HTTPFlow:
    flow = tflow.tflow(resp=True)
    flow.request.path = path
    flow.request.content = body
    flow.request.headers["content-type"] = content_type
    return flow


def _steps_aside(path: str, body: bytes, content_type: str) -> Metadata:
    """A request to `path` carrying `body`: the view gives it priority 0 and mitmproxy's
    registry shows another view; its metadata, for further checks."""
    flow = _flow(path, body, content_type)
    metadata = make_metadata(flow.request, flow)
    assert VIEW.render_priority(body, metadata) == 0
    assert shown(flow.request, flow).view_name != VIEW_NAME
    return metadata


@pytest.mark.parametrize(
    ("path", "body", "content_type"),
    [
        ("/index.html", b"<html><body>hi</body></html>", "text/html"),
        ("/api/users", b'{"users": []}', "application/json"),
        ("/v1/chat/completions", b"", "application/json"),
    ],
    ids=["html", "json-elsewhere", "empty-model-body"],
)
def test_a_body_this_view_does_not_read_gets_priority_zero(
    path: str, body: bytes, content_type: str
) -> None:
    _steps_aside(path, body, content_type)


@pytest.mark.parametrize(
    ("path", "body", "content_type"),
    [
        ("/v1/chat/completions", b'{"messages": [', "application/json"),
        ("/v1/messages", b"\xff\xfe\x00garbage", "application/octet-stream"),
        ("/v1/responses", b"[1, 2, 3]", "application/json"),
        ("/v1/chat/completions", b'{"messages": "not a list", "tools": 5}', "application/json"),
        ("/mcp", b'{"not": "json-rpc"}', "application/json"),
        ("/mcp", b"data: {broken\n\n", "text/event-stream"),
    ],
    ids=["truncated-json", "binary", "json-array", "wrong-shapes", "not-jsonrpc", "bad-sse"],
)
def test_garbage_at_a_model_or_mcp_path_never_raises(
    path: str, body: bytes, content_type: str
) -> None:
    metadata = _steps_aside(path, body, content_type)
    text = VIEW.prettify(body, metadata)  # chosen by hand in mitmweb: an answer, no raise
    assert text.startswith("not a conversation: ")


def test_a_model_response_stream_without_json_events_steps_aside() -> None:
    flow = flows_of("specs/chat.trace.yaml")[0]
    assert flow.response is not None
    flow.response.content = b"data: [DONE]\n\n"
    flow.response.headers["content-type"] = "text/event-stream"
    metadata = make_metadata(flow.response, flow)
    assert VIEW.render_priority(flow.response.content, metadata) == 0
    assert VIEW.prettify(flow.response.content, metadata).startswith("not a conversation: ")


def test_a_body_without_a_flow_gets_priority_zero() -> None:
    assert VIEW.render_priority(b'{"messages": []}', contentviews.Metadata()) == 0


def test_a_trace_with_an_unknown_protocol_names_the_turn(tmp_path: Path) -> None:
    text = (
        (REPO / "specs/chat.trace.yaml")
        .read_text()
        .replace("turns:\n- request:", "turns:\n- protocol: smoke-signals\n  request:", 1)
    )
    bad = tmp_path / "bad.trace.yaml"
    bad.write_text(text)
    with pytest.raises(TraceError) as info:  # refused when the trace loads, at its line
        trace_flows(traces.load(bad), str(bad))
    assert f"{bad}:9: turn 1 is malformed: unknown protocol 'smoke-signals'" in str(info.value)


def test_a_non_object_answer_at_status_200_steps_aside() -> None:
    flow = flows_of("specs/responses.trace.yaml")[0]
    assert flow.response is not None
    flow.response.content = b"[1, 2, 3]"
    metadata = make_metadata(flow.response, flow)
    assert VIEW.render_priority(flow.response.content, metadata) == 0


def test_an_error_status_reads_as_its_message() -> None:
    flow = flows_of("specs/anthropic.trace.yaml")[0]
    assert flow.response is not None
    flow.response.status_code = 429
    flow.response.content = (
        b'{"type": "error", "error": {"type": "rate_limit", "message": "slow down"}}'
    )
    assert shown(flow.response, flow).text.splitlines() == [
        "anthropic response, status 429",
        "",
        "error: slow down",
    ]


def test_an_answer_reads_even_when_its_request_is_garbage() -> None:
    flow = flows_of("specs/chat.trace.yaml")[1]
    assert flow.response is not None
    flow.request.content = b"\x00not json"
    assert shown(flow.request, flow).view_name != VIEW_NAME
    assert "reply:" in shown(flow.response, flow).text


def test_gemini_json_array_stream_reads_as_the_answer() -> None:
    flow = flows_of("specs/gemini.trace.yaml")[1]
    assert flow.response is not None
    whole = shown(flow.response, flow).text.splitlines()
    chunks = dialect_named("gemini").stream_chunks(json.loads(flow.response.content or b""))
    assert len(chunks) > 1
    flow.response.content = json.dumps(chunks).encode()
    assert shown(flow.response, flow).text.splitlines() == [
        f"{whole[0]}, a chunk array",
        *whole[1:],
    ]


class _Broken:
    def feed(self, flow: http.HTTPFlow) -> None:
        raise OSError("the pipe is gone")


def test_a_failing_view_never_disturbs_the_run(caplog: pytest.LogCaptureFixture) -> None:
    tap = FlowTap(_Broken())  # type: ignore[arg-type]
    flow = flows_of("specs/chat.trace.yaml")[0]
    tap.response(flow)  # no raise: the run goes on
    assert "a flow was not shown in mitmweb: the pipe is gone" in caplog.text


def test_an_endpoint_call_reads_as_what_was_asked_and_what_came_back() -> None:
    """An embeddings call is listed as such, never as a reply (the dialect reads it)."""
    body = json.dumps({"model": "text-embedding-3-small", "input": ["refunds?"]}).encode()
    flow = _flow("/v1/embeddings", body, "application/json")
    answer = {"object": "list", "data": [{"embedding": [0.1, 0.2]}, {"embedding": [0.3, 0.4]}]}
    flow.response = http.Response.make(
        200, json.dumps(answer), {"content-type": "application/json"}
    )
    assert lines_shown(flow.request, flow) == [
        "openai-embeddings request, model text-embedding-3-small",
        "",
        'input: ["refunds?"]',
    ]
    assert lines_shown(flow.response, flow) == [
        "openai-embeddings response, status 200",
        "",
        "2 vectors of 2",
    ]


def test_a_streamed_legacy_completion_is_reassembled_by_its_dialect() -> None:
    dialect = dialect_named("openai-completions")
    request = {"model": "gpt-3.5-turbo-instruct", "prompt": "Say", "stream": True}
    rendered = dialect.render(
        request, 200, dialect.canned_response(request, "hello there"), stream=True
    )
    flow = _flow("/v1/completions", json.dumps(request).encode(), "application/json")
    flow.response = http.Response.make(200, rendered.body, {"content-type": rendered.content_type})
    lines = shown(flow.response, flow).text.splitlines()
    assert lines[0].startswith("openai-completions response, status 200, reassembled from ")
    assert lines[-1] == "text: hello there"
