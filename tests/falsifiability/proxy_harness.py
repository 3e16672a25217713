"""The run's own proxy (`runner.run_proxy.RunProxy`) for the boundary and hostile-input
probes: flows with a model and an MCP listener each, a spy on every server connection the
proxy opens, and a record of every error mitmproxy logged (an exception escaping a hook is
logged as "Addon error"; a crashed connection as "mitmproxy has crashed")."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.mcp.http import HttpMcpSession
from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.runner.run_proxy import RunProxy
from tests.unit.proxy_clients import LoopThread, request

CHAT = "/v1/chat/completions"
MODEL_ROUTES = (
    CHAT,
    "/v1/responses",
    "/v1/messages",
    "/v1beta/models/gemini-2.0-flash:generateContent",
    "/v1beta/models/gemini-2.0-flash:streamGenerateContent",
)
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()


def turn() -> Turn:
    return Turn("openai-chat", REQUEST, 200, ANSWER)


def replay_session() -> CassetteSession:
    return CassetteSession(Mode.REPLAY, recorded=[turn()])


class DialSpy:
    """Every connection the proxy opened toward a server (mitmproxy's `server_connect`)."""

    def __init__(self) -> None:
        self.dials: list[Any] = []

    def server_connect(self, data: Any) -> None:
        self.dials.append(data.server.address)


class LoggedErrors(logging.Handler):
    """mitmproxy's error log lines: none may appear while hostile input is answered."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclass
class OneFlow:
    """One flow's listeners on the run's proxy: the model's and one MCP server's."""

    model_port: int
    mcp_port: int
    session: CassetteSession
    mcp: HttpMcpSession
    exit: Any = None


@dataclass
class Harness:
    loop: LoopThread
    hub: RunProxy
    spy: DialSpy
    errors: LoggedErrors
    flows: list[OneFlow] = field(default_factory=list)

    def open_flow(
        self, session: CassetteSession | None = None, mcp: HttpMcpSession | None = None
    ) -> OneFlow:
        session = session or replay_session()
        mcp = mcp or HttpReplaySession("files", lane=Lane())
        listening = self.hub.listen(session)
        model_port = self.loop.run(listening.__aenter__())

        async def mcp_listener() -> int:
            host = await self.hub.start()
            port = await host.add_listener()
            self.hub.mcp_sessions[port] = mcp
            return port

        flow = OneFlow(model_port, self.loop.run(mcp_listener()), session, mcp, listening)
        self.flows.append(flow)
        return flow

    def renew(self, flow: OneFlow) -> CassetteSession:
        """A fresh replay session on the flow's model listener (its one turn unserved)."""
        flow.session = replay_session()
        self.hub.model_sessions[flow.model_port] = flow.session
        return flow.session

    def close_flow(self, flow: OneFlow) -> None:
        """The flow ends: its listeners close, and every connection accepted on them."""
        if flow not in self.flows:
            return
        self.flows.remove(flow)
        self.loop.run(flow.exit.__aexit__(None, None, None))
        self.hub.mcp_sessions.pop(flow.mcp_port, None)
        if self.hub.host is not None:
            self.loop.run(self.hub.host.remove_listener(flow.mcp_port))

    def close(self) -> None:
        for flow in list(reversed(self.flows)):
            with contextlib.suppress(Exception):
                self.close_flow(flow)
        self.loop.run(self.hub.stop())
        self.loop.close()


@contextlib.contextmanager
def one_test(running: Harness) -> Iterator[Harness]:
    """A test on a shared proxy: its flows end with it, and it leaves no logged error and no
    server connection behind (both checked, then cleared for the next test)."""
    try:
        yield running
    finally:
        for flow in list(running.flows):
            running.close_flow(flow)
    errors, dials = list(running.errors.lines), list(running.spy.dials)
    running.errors.lines.clear()
    running.spy.dials.clear()
    assert errors == []  # nothing escaped a hook, no connection crashed
    assert dials == []  # nothing was forwarded anywhere


@contextlib.contextmanager
def running_harness() -> Iterator[Harness]:
    spy, errors = DialSpy(), LoggedErrors()
    mitmproxy_log = logging.getLogger("mitmproxy")
    mitmproxy_log.addHandler(errors)
    running = Harness(LoopThread(), RunProxy([spy]), spy, errors)
    try:
        running.loop.run(running.hub.start())
        yield running
    finally:
        running.close()
        mitmproxy_log.removeHandler(errors)


@pytest.fixture(scope="module", name="proxy")
def shared_proxy() -> Iterator[Harness]:
    """One proxy for a whole test module: a module imports this and `clean_harness`."""
    with running_harness() as running:
        yield running


@pytest.fixture(name="harness")
def clean_harness(proxy: Harness) -> Iterator[Harness]:
    """The module's proxy for one test, left clean by it (see `one_test`)."""
    with one_test(proxy) as running:
        yield running


def post(port: int, path: str, body: bytes, headers: Mapping[str, str] | None = None) -> Any:
    """POST raw bytes; (status, headers, parsed JSON body) - the answer must be JSON."""
    status, answered, raw = request(port, "POST", path, body, dict(headers or {}))
    assert answered.get("content-type", "").startswith("application/json"), (status, raw[:300])
    return status, answered, json.loads(raw)


def message_of(body: Any) -> str:
    """The error message of any dialect's error body, or of a JSON-RPC error."""
    text: str = body["error"]["message"]
    return text


def answered_ok(port: int) -> bool:
    """The flow's one recorded turn is served on this port (the proxy still works)."""
    status, _, body = post(port, CHAT, json.dumps(REQUEST).encode())
    return bool(status == 200 and body["choices"][0]["message"]["content"] == "ok")
