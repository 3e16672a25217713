"""Both boundary addons the way stock mitmdump/mitmweb drives them: options, then hooks.

Everything here goes through mitmproxy's own test context (`taddons.context`), so options
are registered by `load`, set through mitmproxy's option manager (which calls `configure`),
and flows are mitmproxy's `tflow` objects: the path a user takes with
`mitmdump -s addons/model.py --set flowproof_trace=...`, minus the sockets. Only the public
surface is used: hooks, options, flow fields and the trace files written.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mitmproxy import exceptions, hooks, http
from mitmproxy.addons.script import ScriptLoader
from mitmproxy.optmanager import dump_dicts
from mitmproxy.proxy.layers.http import HttpRequestHook
from mitmproxy.test import taddons, tflow

from flowproof_addons.mcp_http import McpHttpBoundary
from flowproof_addons.model import ModelBoundary
from tests.conftest import REPO

WEATHER_TRACE = REPO / "examples" / "agent-demo" / "weather.trace.yaml"
CHAT_PATH = "/v1/chat/completions"
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
UPSTREAM_VARIABLES = ("FLOWPROOF_AGENT_UPSTREAM", "OPENAI_BASE_URL")


# -- builders ---------------------------------------------------------------------------


def post(path: str, body: Any, headers: dict[str, str] | None = None) -> http.HTTPFlow:
    """A flow as the agent sends it to the reverse proxy, not yet answered."""
    request = http.Request.make(
        "POST",
        f"http://127.0.0.1:8080{path}",
        json.dumps(body),
        headers or {"content-type": "application/json"},
    )
    return tflow.tflow(req=request, resp=False)


def completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
    }


def chat(content: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def write_trace(path: Path, requests: list[dict[str, Any]], **sections: Any) -> Path:
    """A trace file in its documented on-disk form: one turn per request, each answered."""
    document = {
        "flowproof_trace": 1,
        "flow": "stock",
        "turns": [
            {"request": request, "response": {"status": 200, "body": completion("hello")}}
            for request in requests
        ],
        **sections,
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def answer_of(flow: http.HTTPFlow) -> dict[str, Any]:
    assert flow.response is not None, "the addon left the flow unanswered"
    answer: dict[str, Any] = json.loads(flow.response.get_content() or b"null")
    return answer


def choices_of(tctx: taddons.context, option: str) -> list[str]:
    """The choices an option offers, as `mitmdump --options` lists them."""
    choices: list[str] = dump_dicts(tctx.options, [option])[option]["choices"]
    return choices


def weather_first_request() -> dict[str, Any]:
    turns = yaml.safe_load(WEATHER_TRACE.read_text())["turns"]
    request: dict[str, Any] = turns[0]["request"]
    return request


class StripUser:
    """A matcher addon: the per-run `user` field never decides a match."""

    def flowproof_normalize(self, request: dict[str, Any], protocol: str) -> dict[str, Any]:
        request.pop("user", None)
        return request


class BrokenMatcher:
    """Fine on the recorded requests; raises on the agent's, which carry a `user`."""

    def flowproof_normalize(self, request: dict[str, Any], protocol: str) -> dict[str, Any]:
        if "user" in request:
            raise KeyError("session")
        return request


@pytest.fixture
def no_upstream_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in UPSTREAM_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model() -> Iterator[tuple[ModelBoundary, taddons.context]]:
    addon = ModelBoundary()
    with taddons.context(addon) as tctx:
        yield addon, tctx


def replaying(tctx: taddons.context, addon: ModelBoundary, trace: Path, *matchers: object) -> None:
    """Set the options and start, as mitmdump does once every `-s` script is loaded."""
    for matcher in matchers:
        tctx.master.addons.add(matcher)
    tctx.configure(addon, flowproof_trace=str(trace))
    addon.running()


def recording(tctx: taddons.context, addon: ModelBoundary, trace: Path) -> None:
    tctx.configure(
        addon,
        flowproof_trace=str(trace),
        flowproof_mode="record",
        flowproof_upstream="http://127.0.0.1:9/v1",
    )
    addon.running()


def requested(addon: ModelBoundary, flow: http.HTTPFlow) -> bool:
    """`request` as mitmproxy calls it, awaited when it returns an awaitable (a session
    with matcher addons answers off the event loop); whether it did."""
    pending = addon.request(flow)
    if pending is None:
        return False

    async def answered() -> None:
        await pending

    asyncio.run(answered())
    return True


def upstream_answers(flow: http.HTTPFlow, status: int, body: Any) -> None:
    """Stand in for the real upstream: mitmproxy sets the response, then calls `response`."""
    flow.response = http.Response.make(
        status, json.dumps(body), {"content-type": "application/json"}
    )


# -- the model boundary: options ----------------------------------------------------------


def test_model_load_registers_its_options_with_defaults(model) -> None:
    _, tctx = model
    options = tctx.options
    assert (options.flowproof_trace, options.flowproof_mode, options.flowproof_upstream) == (
        "",
        "replay",
        "",
    )
    assert set(choices_of(tctx, "flowproof_mode")) == {"replay", "record"}


def test_model_without_a_trace_option_stays_idle(model) -> None:
    addon, tctx = model
    tctx.configure(addon, flowproof_mode="replay")
    addon.running()
    flow = post(CHAT_PATH, chat())
    addon.request(flow)
    assert flow.response is None  # nothing configured: mitmproxy's own behaviour applies


def _refuses_a_missing_trace(addon: Any, tctx: Any, option: str, tmp_path: Path) -> None:
    """Setting `option` to a trace that does not exist is an OptionsError naming the path."""
    missing = tmp_path / "nope.trace.yaml"
    with pytest.raises(exceptions.OptionsError, match="no trace at") as caught:
        tctx.configure(addon, **{option: str(missing)})
    assert str(missing) in str(caught.value)


def test_model_missing_trace_is_an_options_error_naming_the_path(model, tmp_path) -> None:
    addon, tctx = model
    _refuses_a_missing_trace(addon, tctx, "flowproof_trace", tmp_path)
    assert tctx.options.flowproof_trace == ""  # mitmproxy rolled the bad value back


def test_model_malformed_trace_is_an_options_error_naming_the_file(model, tmp_path) -> None:
    addon, tctx = model
    broken = tmp_path / "broken.trace.yaml"
    broken.write_text("flowproof_trace: 1\nturns: [unclosed\n")
    with pytest.raises(exceptions.OptionsError) as caught:
        tctx.configure(addon, flowproof_trace=str(broken))
    assert str(broken) in str(caught.value)
    assert "Traceback" not in str(caught.value)


def test_model_record_without_any_upstream_is_an_options_error(
    model, tmp_path, no_upstream_env
) -> None:
    addon, tctx = model
    with pytest.raises(exceptions.OptionsError, match="FLOWPROOF_AGENT_UPSTREAM"):
        tctx.configure(
            addon, flowproof_trace=str(tmp_path / "x.trace.yaml"), flowproof_mode="record"
        )


def test_model_record_rejects_a_non_http_upstream_from_the_environment(
    model, tmp_path, no_upstream_env, monkeypatch
) -> None:
    addon, tctx = model
    monkeypatch.setenv("FLOWPROOF_AGENT_UPSTREAM", "ftp://127.0.0.1/v1")
    with pytest.raises(exceptions.OptionsError, match="not an http"):
        tctx.configure(
            addon, flowproof_trace=str(tmp_path / "x.trace.yaml"), flowproof_mode="record"
        )


# -- the model boundary: replay -----------------------------------------------------------


def test_model_replay_answers_the_weather_agent_from_the_example_trace(model) -> None:
    addon, tctx = model
    replaying(tctx, addon, WEATHER_TRACE)
    flow = post(CHAT_PATH, weather_first_request())
    addon.request(flow)
    assert flow.response is not None and flow.response.status_code == 200
    calls = answer_of(flow)["choices"][0]["message"]["tool_calls"]
    assert [call["function"]["name"] for call in calls] == ["get_weather", "get_time"]
    assert flow.comment == "flowproof: answered from the trace"
    assert not flow.marked


def test_model_divergence_marks_the_flow_and_stops_sdk_retries(model) -> None:
    addon, tctx = model
    replaying(tctx, addon, WEATHER_TRACE)
    flow = post(CHAT_PATH, {**weather_first_request(), "model": "gpt-5"})
    addon.request(flow)
    assert flow.response is not None and flow.response.status_code == 409
    assert flow.response.headers["x-should-retry"] == "false"
    message = answer_of(flow)["error"]["message"]
    assert "model changed: recorded gpt-4o-mini, replayed gpt-5" in message
    assert flow.marked == ":warning:"
    assert flow.comment.startswith("flowproof: turn 1: model changed")


def test_model_replay_applies_the_faults_the_trace_was_recorded_with(model, tmp_path) -> None:
    addon, tctx = model
    document = yaml.safe_load(WEATHER_TRACE.read_text())
    document["faults"] = [{"at": "model call 1", "kind": "answer", "value": 429}]
    faulted = tmp_path / "faulted.trace.yaml"
    faulted.write_text(yaml.safe_dump(document))
    replaying(tctx, addon, faulted)
    first, retry = (
        post(CHAT_PATH, weather_first_request()),
        post(CHAT_PATH, weather_first_request()),
    )
    addon.request(first)
    addon.request(retry)
    assert first.response is not None and first.response.status_code == 429
    assert "x-should-retry" not in first.response.headers  # the SDK may retry it
    assert retry.response is not None and retry.response.status_code == 200


def test_model_leaves_non_model_routes_and_answered_flows_alone(model) -> None:
    addon, tctx = model
    replaying(tctx, addon, WEATHER_TRACE)
    elsewhere = post("/v1/audio/speech", {"input": "x"})
    addon.request(elsewhere)
    assert elsewhere.response is None  # the guard, not this addon, refuses it
    answered = post(CHAT_PATH, weather_first_request())
    answered.response = http.Response.make(204)
    addon.request(answered)
    assert answered.response.status_code == 204


def test_model_matcher_addons_among_loaded_addons_decide_the_match(model, tmp_path) -> None:
    addon, tctx = model
    trace = write_trace(tmp_path / "t.trace.yaml", [chat()])
    replaying(tctx, addon, trace, StripUser())
    flow = post(CHAT_PATH, chat(user="run-42"))
    assert requested(addon, flow)  # off the event loop: the addon's code cannot hold it
    assert flow.response is not None and flow.response.status_code == 200
    assert answer_of(flow)["choices"][0]["message"]["content"] == "hello"


def test_model_without_the_matcher_the_same_request_diverges(model, tmp_path) -> None:
    addon, tctx = model
    trace = write_trace(tmp_path / "t.trace.yaml", [chat()])
    replaying(tctx, addon, trace)
    flow = post(CHAT_PATH, chat(user="run-42"))
    assert not requested(addon, flow)  # no matcher addon: answered at once, no thread
    assert flow.response is not None and flow.response.status_code == 409
    assert flow.marked == ":warning:"


def test_model_a_failing_matcher_addon_is_a_named_500(model, tmp_path) -> None:
    addon, tctx = model
    trace = write_trace(tmp_path / "t.trace.yaml", [chat()])
    replaying(tctx, addon, trace, BrokenMatcher())
    flow = post(CHAT_PATH, chat(user="run-1"))
    requested(addon, flow)
    assert flow.response is not None and flow.response.status_code == 500
    error = answer_of(flow)["error"]
    assert error["type"] == "flowproof_matcher_error"
    assert "the matcher addon BrokenMatcher raised KeyError" in error["message"]


def test_model_loaded_with_dash_s_finds_matcher_scripts_loaded_beside_it(tmp_path) -> None:
    """mitmproxy's own script loader, as `mitmdump -s addons/model.py -s strip_user.py`."""
    matcher = tmp_path / "strip_user.py"
    matcher.write_text(
        "class StripUser:\n"
        "    def flowproof_normalize(self, request, protocol):\n"
        "        request.pop('user', None)\n"
        "        return request\n\n\n"
        "addons = [StripUser()]\n"
    )
    trace = write_trace(tmp_path / "t.trace.yaml", [chat()])

    async def scenario() -> tuple[http.HTTPFlow, http.HTTPFlow]:
        loader = ScriptLoader()
        with taddons.context(loader) as tctx:
            tctx.configure(loader, scripts=[str(REPO / "addons" / "model.py"), str(matcher)])
            for _ in range(3):  # the loader imports scripts on the next loop iterations
                await asyncio.sleep(0)
            tctx.configure(loader, flowproof_trace=str(trace))
            await tctx.master.addons.trigger_event(hooks.RunningHook())
            model_call = post(CHAT_PATH, chat(user="run-7"))
            await tctx.master.addons.handle_lifecycle(HttpRequestHook(model_call))
            other = post("/admin", {})
            await tctx.master.addons.handle_lifecycle(HttpRequestHook(other))
            return model_call, other

    model_call, other = asyncio.run(scenario())
    assert model_call.response is not None and model_call.response.status_code == 200
    assert answer_of(model_call)["choices"][0]["message"]["content"] == "hello"
    assert other.response is not None and other.response.status_code == 404  # the guard
    assert "is not a model endpoint flowproof records" in answer_of(other)["error"]["message"]


# -- the model boundary: record -------------------------------------------------------------


def test_model_record_forwards_upstream_and_done_writes_the_trace(model, tmp_path) -> None:
    addon, tctx = model
    trace = tmp_path / "new.trace.yaml"
    recording(tctx, addon, trace)
    flow = post(
        CHAT_PATH,
        chat(),
        {"content-type": "application/json", "authorization": "Bearer agent-placeholder"},
    )
    addon.request(flow)
    assert flow.response is None  # mitmproxy sends it on upstream
    assert flow.request.url == "http://127.0.0.1:9/v1/chat/completions"
    assert "authorization" not in flow.request.headers  # the agent's key never travels
    upstream_answers(flow, 200, completion("recorded answer"))
    addon.response(flow)
    assert flow.response is not None
    assert answer_of(flow)["choices"][0]["message"]["content"] == "recorded answer"
    assert flow.comment == "flowproof: recorded"
    assert not trace.exists()  # written once, on exit
    addon.done()
    written = yaml.safe_load(trace.read_text())
    assert [turn["request"] for turn in written["turns"]] == [chat()]
    assert written["turns"][0]["response"]["body"]["choices"][0]["message"]["content"] == (
        "recorded answer"
    )


def test_model_record_keeps_the_matcher_snapshot_in_the_trace(model, tmp_path) -> None:
    addon, tctx = model
    trace = tmp_path / "new.trace.yaml"
    tctx.master.addons.add(StripUser())
    recording(tctx, addon, trace)
    flow = post(CHAT_PATH, chat(user="run-1"))
    requested(addon, flow)
    upstream_answers(flow, 200, completion("ok"))
    addon.response(flow)
    addon.done()
    written = yaml.safe_load(trace.read_text())
    assert written["turns"][0]["request"] == chat()  # stored as matched: no `user`
    assert written["match"] == [{"addon": "StripUser", "from": "mitmproxy -s"}]


def test_model_record_with_an_unreachable_upstream_writes_no_trace(model, tmp_path) -> None:
    addon, tctx = model
    trace = tmp_path / "new.trace.yaml"
    recording(tctx, addon, trace)
    good = post(CHAT_PATH, chat("first"))
    addon.request(good)
    upstream_answers(good, 200, completion("ok"))
    addon.response(good)
    failed = post(CHAT_PATH, chat("second"))
    addon.request(failed)
    failed.error = tflow.terr("connection refused")
    addon.error(failed)
    addon.done()
    assert not trace.exists()  # a partial recording would replay as a lie


def test_model_record_with_no_model_call_writes_no_trace(model, tmp_path) -> None:
    addon, tctx = model
    trace = tmp_path / "new.trace.yaml"
    recording(tctx, addon, trace)
    addon.done()
    assert not trace.exists()


def test_model_replay_done_leaves_the_trace_untouched(model, tmp_path) -> None:
    addon, tctx = model
    trace = write_trace(tmp_path / "t.trace.yaml", [chat()])
    before = trace.read_text()
    replaying(tctx, addon, trace)
    flow = post(CHAT_PATH, chat())
    addon.request(flow)
    addon.done()
    assert trace.read_text() == before


# -- the MCP boundary ------------------------------------------------------------------------


def rpc(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


INITIALIZE = {"protocolVersion": "2025-06-18"}


def mcp_trace(path: Path) -> Path:
    """A lane for `files`: initialize, then a call during which the server asks for roots."""
    lane = {
        "calls": [
            {"method": "initialize", "params": INITIALIZE, "result": INITIALIZE},
            {
                "method": "tools/call",
                "params": {"name": "roots", "arguments": {}},
                "result": {"content": []},
            },
        ],
        "server": [
            {
                "after": 1,
                "during": 2,
                "request": {"method": "roots/list"},
                "answer": {"result": {"roots": []}},
            }
        ],
    }
    return write_trace(path, [], mcp={"files": lane})


def mcp_post(message: Any, path: str = "/mcp") -> http.HTTPFlow:
    return post(path, message, MCP_HEADERS)


def with_mcp(scenario: Any) -> Any:
    """Run one async scenario against a fresh addon inside mitmproxy's test context."""

    async def run() -> Any:
        addon = McpHttpBoundary()
        with taddons.context(addon) as tctx:
            try:
                return await scenario(addon, tctx)
            finally:
                await addon.done()

    return asyncio.run(run())


def mcp_recording(tctx: taddons.context, addon: McpHttpBoundary, trace: Path) -> None:
    """Set the options that record the MCP server `files` into `trace`; its real server's
    URL is a port nothing listens on (a test answers in its place)."""
    tctx.configure(
        addon,
        flowproof_mcp_trace=str(trace),
        flowproof_mcp_server="files",
        flowproof_mcp_mode="record",
        flowproof_mcp_url="http://127.0.0.1:9/mcp",
    )


@pytest.fixture
def mcp() -> Iterator[tuple[McpHttpBoundary, taddons.context]]:
    addon = McpHttpBoundary()
    with taddons.context(addon) as tctx:
        yield addon, tctx


def test_mcp_load_registers_its_options_with_defaults(mcp) -> None:
    _, tctx = mcp
    options = tctx.options
    assert options.flowproof_mcp_trace == ""
    assert options.flowproof_mcp_server == "mcp"
    assert options.flowproof_mcp_mode == "replay"
    assert options.flowproof_mcp_url == ""
    assert set(choices_of(tctx, "flowproof_mcp_mode")) == {"replay", "record"}


def test_mcp_missing_trace_is_an_options_error_naming_the_path(mcp, tmp_path) -> None:
    _refuses_a_missing_trace(*mcp, "flowproof_mcp_trace", tmp_path)


def test_mcp_trace_without_the_servers_lane_is_an_options_error(mcp, tmp_path) -> None:
    addon, tctx = mcp
    trace = mcp_trace(tmp_path / "t.trace.yaml")
    with pytest.raises(exceptions.OptionsError) as caught:
        tctx.configure(addon, flowproof_mcp_trace=str(trace), flowproof_mcp_server="notes")
    assert str(caught.value) == f"{trace} has no lane for the MCP server 'notes'"


def test_mcp_record_without_a_url_is_an_options_error(mcp, tmp_path) -> None:
    addon, tctx = mcp
    with pytest.raises(exceptions.OptionsError, match="record needs flowproof_mcp_url"):
        tctx.configure(
            addon, flowproof_mcp_trace=str(tmp_path / "x.trace.yaml"), flowproof_mcp_mode="record"
        )


def test_mcp_replay_answers_from_the_lane_with_the_agents_id(tmp_path) -> None:
    trace = mcp_trace(tmp_path / "t.trace.yaml")

    async def scenario(addon: McpHttpBoundary, tctx: taddons.context) -> http.HTTPFlow:
        tctx.configure(addon, flowproof_mcp_trace=str(trace), flowproof_mcp_server="files")
        flow = mcp_post(rpc(7, "initialize", INITIALIZE))
        await tctx.cycle(addon, flow)
        return flow

    flow = with_mcp(scenario)
    assert flow.response is not None and flow.response.status_code == 200
    assert answer_of(flow) == {"jsonrpc": "2.0", "id": 7, "result": INITIALIZE}
    assert flow.response.headers["mcp-session-id"]
    assert flow.comment == "flowproof: MCP 'files' answered by flowproof"


def test_mcp_replay_divergence_is_a_named_json_rpc_error(tmp_path) -> None:
    trace = mcp_trace(tmp_path / "t.trace.yaml")

    async def scenario(addon: McpHttpBoundary, tctx: taddons.context) -> http.HTTPFlow:
        tctx.configure(addon, flowproof_mcp_trace=str(trace), flowproof_mcp_server="files")
        flow = mcp_post(rpc(1, "tools/list"))
        await tctx.cycle(addon, flow)
        return flow

    error = answer_of(with_mcp(scenario))["error"]
    assert "the MCP server 'files' diverged at call 1" in error["message"]
    assert "recorded initialize, replayed tools/list" in error["message"]


def test_mcp_replay_streams_an_answer_that_must_wait_over_loopback(tmp_path) -> None:
    """The call's answer waits for the agent to answer roots/list: it is rerouted to the
    addon's own loopback stream server, and its response streams through mitmproxy."""
    trace = mcp_trace(tmp_path / "t.trace.yaml")

    async def scenario(addon: McpHttpBoundary, tctx: taddons.context) -> http.HTTPFlow:
        tctx.configure(addon, flowproof_mcp_trace=str(trace), flowproof_mcp_server="files")
        await tctx.cycle(addon, mcp_post(rpc(1, "initialize", INITIALIZE)))
        flow = mcp_post(rpc(2, "tools/call", {"name": "roots", "arguments": {}}))
        await tctx.cycle(addon, flow)
        assert flow.response is None
        flow.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
        addon.responseheaders(flow)
        return flow

    flow = with_mcp(scenario)
    assert flow.request.method == "GET"
    assert flow.request.host == "127.0.0.1"
    assert flow.comment == "flowproof: MCP 'files' streamed from the lane"
    assert flow.response is not None and flow.response.stream is True


def test_mcp_leaves_paths_without_mcp_alone(tmp_path) -> None:
    trace = mcp_trace(tmp_path / "t.trace.yaml")

    async def scenario(addon: McpHttpBoundary, tctx: taddons.context) -> http.HTTPFlow:
        tctx.configure(addon, flowproof_mcp_trace=str(trace), flowproof_mcp_server="files")
        flow = mcp_post(rpc(1, "initialize", INITIALIZE), path="/v1/chat/completions")
        await tctx.cycle(addon, flow)
        return flow

    flow = with_mcp(scenario)
    assert flow.response is None
    assert flow.request.path == "/v1/chat/completions"  # not rerouted, not claimed


def test_mcp_record_forwards_and_done_adds_the_lane_to_an_existing_trace(tmp_path) -> None:
    """Recording the MCP lane beside a model trace keeps the model turns already there."""
    trace = write_trace(tmp_path / "t.trace.yaml", [chat()])

    async def scenario(addon: McpHttpBoundary, tctx: taddons.context) -> http.HTTPFlow:
        mcp_recording(tctx, addon, trace)
        flow = mcp_post(rpc(1, "initialize", INITIALIZE))
        await tctx.cycle(addon, flow)
        assert flow.response is None  # mitmproxy sends it on to the real server
        upstream_answers(flow, 200, {"jsonrpc": "2.0", "id": 1, "result": INITIALIZE})
        addon.responseheaders(flow)
        addon.response(flow)
        return flow

    flow = with_mcp(scenario)  # `done` runs on the way out
    assert flow.request.url == "http://127.0.0.1:9/mcp"
    written = yaml.safe_load(trace.read_text())
    assert [turn["request"] for turn in written["turns"]] == [chat()]
    assert written["mcp"]["files"]["calls"] == [
        {"method": "initialize", "params": INITIALIZE, "result": INITIALIZE}
    ]


def test_mcp_record_reads_an_sse_answer_as_it_streams_through(tmp_path) -> None:
    trace = tmp_path / "new.trace.yaml"
    event = b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{"tools":[]}}\n\n'

    async def scenario(addon: McpHttpBoundary, tctx: taddons.context) -> bytes:
        mcp_recording(tctx, addon, trace)
        flow = mcp_post(rpc(1, "tools/list"))
        await tctx.cycle(addon, flow)
        flow.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
        addon.responseheaders(flow)
        tee = flow.response.stream
        assert callable(tee)
        passed = tee(event[:17]) + tee(event[17:]) + tee(b"")  # split mid-event, then EOF
        addon.response(flow)
        return passed

    assert with_mcp(scenario) == event  # the agent gets the bytes unchanged
    calls = yaml.safe_load(trace.read_text())["mcp"]["files"]["calls"]
    assert calls == [{"method": "tools/list", "result": {"tools": []}}]


def test_mcp_replay_done_writes_nothing(tmp_path) -> None:
    trace = mcp_trace(tmp_path / "t.trace.yaml")
    before = trace.read_text()

    async def scenario(addon: McpHttpBoundary, tctx: taddons.context) -> None:
        tctx.configure(addon, flowproof_mcp_trace=str(trace), flowproof_mcp_server="files")
        await tctx.cycle(addon, mcp_post(rpc(1, "initialize", INITIALIZE)))

    with_mcp(scenario)
    assert trace.read_text() == before


@pytest.mark.parametrize(
    ("addon_type", "option"),
    [(ModelBoundary, "flowproof_mode"), (McpHttpBoundary, "flowproof_mcp_mode")],
)
def test_a_mistyped_mode_is_an_options_error_not_a_silent_replay(
    addon_type: type, option: str, tmp_path: Path
) -> None:
    """mitmproxy does not check an option's choices on `--set`: the addon does."""
    addon = addon_type()
    trace = mcp_trace(tmp_path / "t.trace.yaml")
    with taddons.context(addon) as tctx, pytest.raises(exceptions.OptionsError) as caught:
        tctx.configure(addon, **{option: "recrod"}, **{option.replace("mode", "trace"): str(trace)})
    assert str(caught.value) == f"{option} is 'recrod': use replay or record"


class AlwaysBroken:
    """Raises on every request, the recorded ones included."""

    def flowproof_normalize(self, request: dict[str, Any], protocol: str) -> dict[str, Any]:
        raise ValueError("cannot read this request")


def test_model_a_matcher_failing_on_the_recorded_requests_is_logged_not_raised(
    model, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    addon, tctx = model
    trace = write_trace(tmp_path / "t.trace.yaml", [chat()])
    with caplog.at_level("ERROR"):
        replaying(tctx, addon, trace, AlwaysBroken())  # `running` must not raise
    assert addon.default is None
    assert "the matcher addon AlwaysBroken raised ValueError: cannot read this request" in (
        caplog.text
    )
    flow = post(CHAT_PATH, chat())
    addon.request(flow)
    assert flow.response is None  # nothing is answered from the trace
