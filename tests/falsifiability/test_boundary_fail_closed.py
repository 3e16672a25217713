"""The proxy boundary fails closed: whatever goes wrong while a request is handled, the agent
gets a flowproof error, the flow fails, and nothing is forwarded anywhere.

Each defect here was first seen as a request that slipped past the boundaries and went on to
mitmproxy's placeholder reverse target (127.0.0.1:9), answered by mitmproxy's own 502 page
while the flow's verdict and a recording knew nothing of it. The proxy under test is the
run's own (`runner.run_proxy.RunProxy`), with a spy counting every server connection the
proxy opens: a request that fails closed opens none.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from mitmproxy import ctx, http
from mitmproxy.test import taddons, tflow

from flowproof_addons.guard import RequestGuard
from flowproof_addons.mcp_http import McpHttpBoundary
from flowproof_addons.model import ModelBoundary
from flowproof_cli.cassette import CassetteSession, Mode
from flowproof_cli.cassette.session import INTERNAL_KIND
from flowproof_cli.mcp.http import HttpMcpSession
from flowproof_cli.mcp.http_record import HttpRecordSession
from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.runner.proxy_engine import ProxyEngine
from tests.conftest import run_cli
from tests.e2e.test_stock_mitmdump import stock_proxy
from tests.falsifiability.proxy_harness import (
    ANSWER,
    CHAT,
    MCP_HEADERS,
    MODEL_ROUTES,
    PING,
    REQUEST,
    DialSpy,
    Harness,
    clean_harness,  # noqa: F401 (a fixture)
    message_of,
    post,
    shared_proxy,  # noqa: F401 (a fixture)
    turn,
)
from tests.unit.proxy_clients import LoopThread, request
from tests.unit.test_addons_stock import mcp_recording, recording, with_mcp

DEPTH = 100_000


def deep_json(depth: int = DEPTH) -> bytes:
    """A JSON object whose one field nests `depth` arrays: valid JSON, too deep to parse."""
    return b'{"model": "m", "messages": ' + b"[" * depth + b"]" * depth + b"}"


# -- the model boundary ----------------------------------------------------------------------


@pytest.mark.parametrize("path", MODEL_ROUTES)
def test_json_nested_100000_deep_is_refused_on_every_model_route(
    harness: Harness, path: str
) -> None:
    flow = harness.open_flow()
    status, headers, body = post(flow.model_port, path, deep_json())
    expected = f"flowproof: the request to {path} is JSON nested too deeply to read"
    # The rule for every exception while handling a request: a 500 naming it.
    assert (status, message_of(body)) == (500, expected)
    assert headers["x-should-retry"] == "false"
    assert flow.session.errors == [expected]  # the flow fails with this message
    assert harness.spy.dials == []


def test_a_body_that_claims_gzip_but_is_not_is_refused(harness: Harness) -> None:
    flow = harness.open_flow()
    status, _, body = post(
        flow.model_port, CHAT, json.dumps(REQUEST).encode(), {"content-encoding": "gzip"}
    )
    expected = (
        f"flowproof: the request to {CHAT} says Content-Encoding: gzip, but its body is "
        "not gzip data"
    )
    assert (status, message_of(body)) == (500, expected)  # decoding raised: the 500 rule
    assert flow.session.errors == [expected]
    assert flow.session.served == [] and harness.spy.dials == []


@pytest.mark.parametrize("encoding", ["compress", "x-unknown", "gzip, gzip"])
def test_an_encoding_flowproof_cannot_decode_is_refused(harness: Harness, encoding: str) -> None:
    """mitmproxy hands such a body on undecoded; read as JSON it would be a lie."""
    flow = harness.open_flow()
    status, _, body = post(
        flow.model_port, CHAT, json.dumps(REQUEST).encode(), {"content-encoding": encoding}
    )
    assert status == 415
    assert message_of(body) == (
        f"flowproof: the request to {CHAT} says Content-Encoding: {encoding}, which flowproof "
        "cannot decode (send it as identity, gzip, deflate, br or zstd)"
    )
    assert flow.session.errors == [message_of(body)]
    assert flow.session.served == [] and harness.spy.dials == []


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        (CHAT, {"model": "m", "messages": 5}),
        ("/v1/messages", {"model": "m", "max_tokens": 5, "messages": 5}),
        ("/v1beta/models/g:generateContent", {"contents": 5}),
    ],
    ids=["chat-messages-5", "anthropic-messages-5", "gemini-contents-5"],
)
def test_wrong_typed_fields_are_the_agents_400_that_fails_the_flow(
    harness: Harness, path: str, fields: dict[str, Any]
) -> None:
    """The agent's mistake, named as such with the field (it was a 500 "could not handle
    the request", worded as flowproof's own fault)."""
    flow = harness.open_flow()
    status, headers, body = post(flow.model_port, path, json.dumps(fields).encode())
    assert status == 400
    assert headers["x-should-retry"] == "false"
    text = message_of(body)
    assert text.startswith(f"flowproof: the agent's request to {path} is not a valid ")
    field = next(name for name, value in fields.items() if value == 5 and name != "max_tokens")
    assert f" request: its `{field}` is the number 5, which the " in text
    assert text.endswith("); it was refused, not matched")
    assert flow.session.errors == [text]
    assert harness.spy.dials == []


GEMINI = "/v1beta/models/gemini-2.0-flash:generateContent"
GEMINI_REQUEST = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).encode()
#: Google's canonical status names for the HTTP statuses flowproof answers with.
CANONICAL = {
    400: "INVALID_ARGUMENT",
    409: "ABORTED",
    415: "INVALID_ARGUMENT",
    500: "INTERNAL",
    502: "UNAVAILABLE",
}


@pytest.mark.parametrize(
    ("status", "reason", "body", "headers", "where"),
    [
        (415, "invalid_request_error", GEMINI_REQUEST, {"content-encoding": "x-unknown"}, "model"),
        (500, INTERNAL_KIND, GEMINI_REQUEST, {"content-encoding": "gzip"}, "model"),
        (400, "invalid_request_error", b'{"contents": 5}', {}, "model"),
        (500, INTERNAL_KIND, deep_json(), {}, "model"),
        (400, "invalid_request_error", b"[]", {}, "model"),
        (409, "flowproof_divergence", GEMINI_REQUEST, {}, "model"),
        (502, "flowproof_no_upstream", GEMINI_REQUEST, {}, "record"),
        (500, "flowproof_unanswered", GEMINI_REQUEST, {}, "mcp"),
    ],
    ids=[
        "415-encoding",
        "500-not-gzip",
        "400-contents-5",
        "500-too-deep",
        "400-not-an-object",
        "409-divergence",
        "502-no-upstream",
        "500-backstop",
    ],
)
def test_every_gemini_error_body_carries_the_status_it_is_sent_with(
    harness: Harness, status: int, reason: str, body: bytes, headers: dict[str, str], where: str
) -> None:
    """Google's error shape holds the HTTP status as `code` and its canonical name as
    `status` (it said 409 under a 500); flowproof's own kind is an ErrorInfo's reason."""
    flow = harness.open_flow(session=CassetteSession(Mode.RECORD) if where == "record" else None)
    port = flow.mcp_port if where == "mcp" else flow.model_port
    answered, _, error_body = post(port, GEMINI, body, headers)
    assert answered == status
    error = error_body["error"]
    assert (error["code"], error["status"]) == (status, CANONICAL[status]), error
    assert error["message"].startswith("flowproof: ")
    assert error["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "flowproof",
        }
    ]
    assert harness.spy.dials == []


@pytest.mark.parametrize("path", [CHAT, "/v1/responses", "/v1/messages"])
def test_no_dialect_calls_a_500_a_client_error(harness: Harness, path: str) -> None:
    """The other dialects carry no status in the body, but their error type must not
    contradict it: a body that fails to decode is a 500 of the internal kind (it said
    `invalid_request_error`, a 400's type, under the 500)."""
    flow = harness.open_flow()
    answered, _, error_body = post(
        flow.model_port, path, json.dumps(REQUEST).encode(), {"content-encoding": "gzip"}
    )
    assert answered == 500
    assert error_body["error"]["type"] == INTERNAL_KIND
    status, _, refused = post(
        flow.model_port, path, json.dumps(REQUEST).encode(), {"content-encoding": "x-unknown"}
    )
    assert (status, refused["error"]["type"]) == (415, "invalid_request_error")


class ExplodingSession(CassetteSession):
    """A session whose own request handling raises, as any future bug would."""

    def on_request(self, path: str, raw_body: bytes, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")


def test_an_exception_escaping_the_session_is_answered_not_forwarded(harness: Harness) -> None:
    flow = harness.open_flow(session=ExplodingSession(Mode.REPLAY, recorded=[turn()]))
    status, _, body = post(flow.model_port, CHAT, json.dumps(REQUEST).encode())
    expected = (
        f"flowproof: could not handle the request to {CHAT} (RuntimeError: boom); "
        "it was refused, not forwarded"
    )
    assert (status, message_of(body)) == (500, expected)
    assert flow.session.errors == [expected]
    assert harness.spy.dials == []


class FixedUpstream:
    """A loopback model upstream answering every POST with one body (record's far end)."""

    def __init__(self, body: bytes, content_type: str = "application/json") -> None:
        answer = (body, content_type)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                self.send_response(200)
                self.send_header("content-type", answer[1])
                self.send_header("content-length", str(len(answer[0])))
                self.end_headers()
                self.wfile.write(answer[0])

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the guard at the end of the chain -------------------------------------------------------


def test_a_model_route_on_an_mcp_listener_is_refused_and_fails_that_flow(
    harness: Harness,
) -> None:
    """No model session answers there: the backstop refuses it, and counts it."""
    flow = harness.open_flow()
    status, headers, body = post(flow.mcp_port, CHAT, json.dumps(REQUEST).encode())
    text = (
        f"POST {CHAT} reached no flowproof boundary on this listener "
        f"(127.0.0.1:{flow.mcp_port}); it was refused, not forwarded"
    )
    assert (status, message_of(body)) == (500, f"flowproof: {text}")
    assert headers["x-should-retry"] == "false"
    assert flow.mcp.errors == [f"the MCP server 'files': {text}"]
    assert flow.session.errors == []  # the model listener of the same flow was not involved
    assert harness.spy.dials == []


def test_every_in_process_proxy_ends_with_the_backstop(proxy: Harness) -> None:
    """A proxy built with the front guard alone (no boundary) still forwards nothing."""
    spy = DialSpy()
    loop = LoopThread()
    proxy = ProxyEngine([RequestGuard(), spy])
    shared = ctx.master, ctx.options  # mitmproxy's one master per process: this module's
    try:
        port = loop.run(proxy.start())
        status, _, body = post(port, CHAT, json.dumps(REQUEST).encode())
    finally:
        loop.run(proxy.stop())
        loop.close()
        ctx.master, ctx.options = shared
    assert status == 500
    assert "reached no flowproof boundary on this listener" in message_of(body)
    assert spy.dials == []


# -- the MCP boundary ------------------------------------------------------------------------


def test_mcp_json_nested_too_deep_is_refused_and_fails_the_flow(harness: Harness) -> None:
    flow = harness.open_flow()
    status, _, body = post(flow.mcp_port, "/mcp", b"[" * DEPTH + b"]" * DEPTH, MCP_HEADERS)
    assert status == 500
    assert message_of(body) == "flowproof: the body is JSON nested too deeply to read"
    assert body["error"]["code"] == -32700
    assert flow.mcp.errors == ["the MCP server 'files': the body is JSON nested too deeply to read"]
    assert harness.spy.dials == []


def test_mcp_body_that_claims_gzip_but_is_not_is_refused(harness: Harness) -> None:
    flow = harness.open_flow()
    status, _, body = post(flow.mcp_port, "/mcp", PING, {**MCP_HEADERS, "content-encoding": "gzip"})
    assert status == 500
    text = "the request to /mcp says Content-Encoding: gzip, but its body is not gzip data"
    assert message_of(body) == f"flowproof: {text}"
    assert flow.mcp.errors == [f"the MCP server 'files': {text}"]
    assert harness.spy.dials == []


class ExplodingMcp(HttpReplaySession):
    def _message(self, message: dict[str, Any], headers: Mapping[str, str]) -> Any:
        raise KeyError("params")


class ExplodingMcpFront(HttpReplaySession):
    def on_request(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("session", "detail"),
    [
        (ExplodingMcp("files", lane=Lane()), "KeyError: 'params'"),
        (ExplodingMcpFront("files", lane=Lane()), "RuntimeError: boom"),
    ],
    ids=["in-the-session", "escaping-the-session"],
)
def test_mcp_exception_is_a_named_500_not_a_forward(
    harness: Harness, session: HttpMcpSession, detail: str
) -> None:
    flow = harness.open_flow(mcp=session)
    status, _, body = post(flow.mcp_port, "/mcp", PING, MCP_HEADERS)
    text = f"could not handle the request to /mcp ({detail}); it was refused, not forwarded"
    assert (status, message_of(body), body["error"]["code"]) == (500, f"flowproof: {text}", -32603)
    assert session.errors == [f"the MCP server 'files': {text}"]
    assert harness.spy.dials == []


def test_mcp_record_an_answer_too_deep_to_read_fails_the_record(harness: Harness) -> None:
    upstream = FixedUpstream(b"[" * DEPTH + b"]" * DEPTH)
    try:
        session = HttpRecordSession("files", url=upstream.url + "/mcp")
        flow = harness.open_flow(mcp=session)
        status, _, body = post(flow.mcp_port, "/mcp", PING, MCP_HEADERS)
    finally:
        upstream.close()
    assert {port for _, port in harness.spy.dials} == {upstream.server.server_address[1]}
    harness.spy.dials.clear()  # the one server record may reach
    assert status == 500
    text = message_of(body).removeprefix("flowproof: ")
    assert text.startswith("could not handle the real server's answer (RecursionError: ")
    assert session.errors == [f"the MCP server 'files': {text}"]  # the lane is not written


# -- stock mitmdump record: a refused request leaves no recording behind --------------------


def _stock_post(path: str, body: bytes, headers: Mapping[str, str]) -> http.HTTPFlow:
    made = http.Request.make("POST", f"http://127.0.0.1:8080{path}", body, dict(headers))
    return tflow.tflow(req=made, resp=False)


def test_stock_mcp_record_with_a_refused_request_writes_no_lane(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the lane was written without the request the agent was refused."""
    trace = tmp_path / "new.trace.yaml"

    async def scenario(addon: McpHttpBoundary, tctx: taddons.context) -> http.HTTPFlow:
        mcp_recording(tctx, addon, trace)
        flow = _stock_post("/mcp", b"{not json", MCP_HEADERS)
        await tctx.cycle(addon, flow)
        return flow

    flow = with_mcp(scenario)  # `done` runs on the way out
    assert flow.response is not None and flow.response.status_code == 400
    assert not trace.exists()
    assert (
        "flowproof: the MCP lane was not written: the MCP server 'files': the body is not JSON"
        in caplog.text
    )


def test_stock_model_record_with_a_refused_request_says_why_no_trace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    trace = tmp_path / "new.trace.yaml"
    addon = ModelBoundary()
    with taddons.context(addon) as tctx:
        recording(tctx, addon, trace)
        flow = _stock_post(CHAT, deep_json(), {"content-type": "application/json"})
        addon.request(flow)
        addon.done()
    assert flow.response is not None and flow.response.status_code == 500
    assert not trace.exists()
    assert (
        f"flowproof: no trace was written: the request to {CHAT} is JSON nested "
        "too deeply to read" in caplog.text
    )


# -- stock mitmdump: both scripts at once ----------------------------------------------------


def _both_scripts_trace(path: Path) -> Path:
    lane = {"calls": [{"method": "ping", "result": {}}]}
    document = {
        "flowproof_trace": 1,
        "flow": "stock",
        "turns": [{"request": REQUEST, "response": {"status": 200, "body": ANSWER}}],
        "mcp": {"files": lane},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_stock_mitmdump_loads_the_model_and_mcp_scripts_together(tmp_path: Path) -> None:
    """Before: "An addon called 'requestguard' already exists" (both scripts had one)."""
    trace = _both_scripts_trace(tmp_path / "t.trace.yaml")
    options = (
        "--set",
        f"flowproof_trace={trace}",
        "--set",
        f"flowproof_mcp_trace={trace}",
        "--set",
        "flowproof_mcp_server=files",
    )
    scripts, absent = ("model.py", "mcp_http.py"), ("Traceback", "already exists")
    with stock_proxy(tmp_path, *scripts, options=options, absent=absent) as port:
        model = post(port, CHAT, json.dumps(REQUEST).encode())
        mcp = post(port, "/mcp", PING, MCP_HEADERS)
        deep = post(port, CHAT, deep_json())
        other = request(port, "GET", "/elsewhere")
    assert model[0] == 200 and model[2]["choices"][0]["message"]["content"] == "ok"
    assert mcp[0] == 200 and mcp[2] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert deep[0] == 500 and "nested too deeply" in message_of(deep[2])
    assert other[0] == 404


# -- the verdict: `flowproof run` fails the flow, with the message, and no traceback ---------


AGENT = """\
import os, sys, urllib.error, urllib.request
body = open(sys.argv[1], "rb").read()
url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
try:
    urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=60)
except urllib.error.HTTPError as exc:
    print("agent got", exc.code)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (deep_json(), f"flowproof: the request to {CHAT} is JSON nested too deeply to read"),
        (
            json.dumps({"model": "m", "messages": 5}).encode(),
            f"flowproof: the agent's request to {CHAT} is not a valid openai-chat request: its "
            "`messages` is the number 5, which the openai-chat dialect cannot read (TypeError: ",
        ),
    ],
    ids=["too-deep", "wrong-type"],
)
def test_flowproof_run_fails_the_flow_naming_the_refused_request(
    tmp_path: Path, body: bytes, message: str
) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "body.json").write_bytes(body)
    spec = {
        "name": "hostile",
        "app": "agent",
        "agent": {"command": f"{sys.executable} agent.py body.json"},
        "steps": [{"prompt": "hi"}, {"assert": "reply contains ok"}],
    }
    (tmp_path / "hostile.flow.yaml").write_text(yaml.safe_dump(spec))
    trace = {
        "flowproof_trace": 1,
        "flow": "hostile",
        "turns": [{"request": REQUEST, "response": {"status": 200, "body": ANSWER}}],
    }
    (tmp_path / "hostile.trace.yaml").write_text(yaml.safe_dump(trace))
    before = (tmp_path / "hostile.trace.yaml").read_bytes()
    done = run_cli("run", tmp_path / "hostile.flow.yaml", cwd=tmp_path, timeout=120)
    assert done.code == 1, done.output
    assert "FAIL: hostile" in done.output and message in done.output, done.output
    assert "Traceback" not in done.output
    assert (tmp_path / "hostile.trace.yaml").read_bytes() == before
