"""Hostile input at every proxy route: each request gets a clear HTTP error (or its honest
answer), the proxy keeps serving the other requests and flows, nothing is forwarded
anywhere, and the verdict stays honest: a flow fails where one of its model or MCP
requests was refused.

The proxy is the run's own (`runner.run_proxy.RunProxy`); a spy sees every server
connection it opens, and mitmproxy's error log must stay empty (an exception escaping a
hook, a crashed connection). Targets at other hosts are names that never resolve
(`.invalid`) or a loopback listener that counts what reaches it: never a real host.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowproof_cli.cassette import CassetteSession, Mode, Upstream
from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.lane import lane_from_document
from tests.falsifiability.proxy_harness import (
    CHAT,
    MCP_HEADERS,
    MODEL_ROUTES,
    REQUEST,
    Harness,
    OneFlow,
    answered_ok,
    clean_harness,  # noqa: F401 (a fixture)
    message_of,
    one_test,
    post,
    shared_proxy,  # noqa: F401 (a fixture)
    turn,
)
from tests.unit.proxy_clients import Listener, raw_exchange, request

BODY = json.dumps(REQUEST).encode()
FUZZ = settings(
    database=None,  # nothing written into the checkout
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
#: What a refused model request may be answered with; each fails the flow.
REFUSALS = {400, 415, 422, 500}


def head(path: str = CHAT, *lines: str, body: bytes = BODY, method: str = "POST") -> bytes:
    """A raw HTTP/1.1 request with a Content-Length, extra header lines as given."""
    fields = ["Host: 127.0.0.1", *lines, f"Content-Length: {len(body)}"]
    return (
        f"{method} {path} HTTP/1.1\r\n".encode() + "\r\n".join(fields).encode() + b"\r\n\r\n" + body
    )


def exchange(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    response = raw_exchange(port, data)
    headers = {name.lower(): value for name, value in response.getheaders()}
    return response.status, headers, response.body  # type: ignore[attr-defined]


def read_until_closed(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


# -- bodies: malformed JSON, JSON that is not an object, content types, invalid UTF-8 ---------


NOT_AN_OBJECT = [
    b'{"model": "m", "messages": [',
    b"[]",
    b'"a string"',
    b"5",
    b"null",
    b"",
    b"\xff\xfe\xfd",
    b'{"model": "\xff\xfe"}',
    b"model=m&messages=hi",
]


@pytest.mark.parametrize("path", MODEL_ROUTES)
def test_a_body_that_is_not_a_json_object_is_a_400_that_fails_the_flow(
    harness: Harness, path: str
) -> None:
    for body in NOT_AN_OBJECT:
        flow = harness.open_flow()
        status, headers, answer = post(flow.model_port, path, body)
        expected = f"flowproof: the request to {path} is not a JSON object"
        assert (status, message_of(answer)) == (400, expected), body
        assert headers["x-should-retry"] == "false"
        assert flow.session.errors == [expected]
        harness.close_flow(flow)


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "", "multipart/form-data"]
)
def test_the_body_decides_not_the_content_type(harness: Harness, content_type: str) -> None:
    """A JSON request is answered whatever content type it claims; a form body is not JSON."""
    flow = harness.open_flow()
    headers = {"content-type": content_type} if content_type else {}
    status, _, answer = post(flow.model_port, CHAT, BODY, headers)
    assert status == 200 and answer["choices"][0]["message"]["content"] == "ok"
    status, _, answer = post(flow.model_port, CHAT, b"model=m", headers)
    assert status == 400 and "is not a JSON object" in message_of(answer)
    assert flow.session.served == [0] and len(flow.session.errors) == 1


def test_a_gzip_body_that_is_gzip_is_read(harness: Harness) -> None:
    flow = harness.open_flow()
    status, _, answer = post(
        flow.model_port, CHAT, gzip.compress(BODY), {"content-encoding": "gzip"}
    )
    assert status == 200 and answer["choices"][0]["message"]["content"] == "ok"
    assert flow.session.errors == []


def test_control_characters_in_the_path_never_reach_a_message_raw(harness: Harness) -> None:
    """The path is quoted in the verdict a terminal prints: its escapes stay visible text."""
    flow = harness.open_flow()
    path = "/\x1b[31m/v1/chat/completions"
    for body, headers, expected in ((b"{", {}, 400), (BODY, {"content-encoding": "gzip"}, 500)):
        status, _, answer = exchange(
            flow.model_port, head(path, *(f"{k}: {v}" for k, v in headers.items()), body=body)
        )
        assert status == expected
        assert "\x1b" not in json.loads(answer)["error"]["message"]
    assert len(flow.session.errors) == 2
    assert all("\x1b" not in error and "\\x1b[31m" in error for error in flow.session.errors)


# -- 50 MB bodies -----------------------------------------------------------------------------


FIFTY_MB = 50_000_000


def _fifty_mb_bodies() -> dict[str, bytes]:
    message = {"role": "user", "content": "x" * 1230}
    many = json.dumps({"model": "m", "messages": [message] * (FIFTY_MB // 1256)}).encode()
    one = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * FIFTY_MB}]})
    return {"garbage": b"\xff" * FIFTY_MB, "one string": one.encode(), "many messages": many}


@pytest.mark.timeout(240)
def test_fifty_mb_bodies_are_answered_and_the_other_flows_keep_being_served(
    harness: Harness,
) -> None:
    """Before: 40,000 messages kept the proxy (every flow) busy for seconds explaining a
    divergence field by field (195,000 for minutes); a 50 MB string took 9 s to be escaped
    whole for its message."""
    other = harness.open_flow()
    for name, body in _fifty_mb_bodies().items():
        assert len(body) >= FIFTY_MB, name
        flow = harness.open_flow()
        status, answer = _post_big(flow.model_port, body)
        if name == "garbage":
            assert status == 400 and flow.session.errors, name
        else:
            assert status == 409 and flow.session.divergence is not None, name
        assert len(message_of(answer)) < 2000, name  # a message, not the body echoed back
        assert answered_ok(other.model_port), name
        harness.renew(other)
        harness.close_flow(flow)


def _post_big(port: int, body: bytes) -> tuple[int, Any]:
    """POST a large body, waiting up to a minute for the answer (a shared CI machine)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", CHAT, body, {"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


# -- chunked bodies -------------------------------------------------------------------------


def _chunked(body: bytes, size: int) -> bytes:
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"


CHUNKED_HEAD = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode()


@pytest.mark.parametrize("size", [1, 7, len(BODY)])
def test_a_chunked_body_is_read_whole(harness: Harness, size: int) -> None:
    flow = harness.open_flow()
    status, _, answer = exchange(flow.model_port, CHUNKED_HEAD + _chunked(BODY, size))
    assert status == 200 and json.loads(answer)["choices"][0]["message"]["content"] == "ok"
    assert flow.session.errors == []


@pytest.mark.parametrize(
    "broken",
    [b"zz\r\n" + BODY + b"\r\n0\r\n\r\n", b"5\r\nabcdefgh\r\n0\r\n\r\n"],
    ids=["bad-chunk-size", "chunk-longer-than-said"],
)
def test_a_broken_chunked_body_closes_the_connection_and_fails_the_flow(
    harness: Harness, broken: bytes
) -> None:
    flow = harness.open_flow()
    with socket.create_connection(("127.0.0.1", flow.model_port), timeout=10) as sock:
        sock.sendall(CHUNKED_HEAD + broken)
        assert read_until_closed(sock) == b""  # mitmproxy closes: the body cannot be read
    (failure,) = flow.session.errors
    assert failure.startswith(
        f"flowproof: POST {CHAT} failed before flowproof could answer it (HTTP/1 protocol error"
    )
    assert answered_ok(flow.model_port)  # the listener still serves


def test_chunked_trailers_close_their_connection_at_once_and_fail_the_flow(
    harness: Harness,
) -> None:
    """mitmproxy 12 cannot read HTTP/1 request trailers: its handling of that connection
    crashes. Left alone, the connection stayed open unanswered until the agent gave up, and
    the flow failed for a reason that named nothing. The backstop closes it at once, the
    flow fails naming mitmproxy's reason, and the listener goes on serving."""
    flow = harness.open_flow()
    trailer = CHUNKED_HEAD + _chunked(BODY, len(BODY))[:-2] + b"X-Checksum: 1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", flow.model_port), timeout=10) as cut:
        cut.sendall(trailer)
        assert read_until_closed(cut) == b""  # closed, not left waiting for the timeout
    (failure,) = flow.session.errors
    assert failure == (
        f"flowproof: mitmproxy could not handle a request on this listener (127.0.0.1:"
        f"{flow.model_port}): NotImplementedError: HTTP trailers are not implemented yet.; its "
        "connection was closed unanswered"
    )
    assert answered_ok(flow.model_port)  # the listener still serves
    assert harness.errors.lines == ["mitmproxy has crashed!"]  # mitmproxy's own report
    harness.errors.lines.clear()


def test_a_crash_on_one_flows_listener_fails_only_that_flow(harness: Harness) -> None:
    flow, other = harness.open_flow(), harness.open_flow()
    trailer = CHUNKED_HEAD + _chunked(BODY, len(BODY))[:-2] + b"X-Checksum: 1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", flow.model_port), timeout=10) as cut:
        cut.sendall(trailer)
        assert read_until_closed(cut) == b""
    assert len(flow.session.errors) == 1
    assert answered_ok(other.model_port) and other.session.errors == []
    harness.errors.lines.clear()


# -- HTTP/2 preface, CONNECT, absolute-form targets, the Host header -------------------------


def test_an_http2_preface_is_a_505(harness: Harness) -> None:
    flow = harness.open_flow()
    status, _, answer = exchange(flow.model_port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert status == 505
    assert json.loads(answer)["error"]["message"] == (
        "flowproof: HTTP/2 with prior knowledge is refused: speak HTTP/1.1 here"
    )
    assert answered_ok(flow.model_port)


@pytest.fixture
def target() -> Iterator[Listener]:
    """A loopback listener that counts what reaches it: nothing may."""
    listener = Listener()
    yield listener
    assert listener.poll() == 0
    listener.close()


def test_connect_is_refused_and_tunnels_nowhere(harness: Harness, target: Listener) -> None:
    flow = harness.open_flow()
    for authority in (f"127.0.0.1:{target.port}", "nowhere.invalid:443"):
        status, _, answer = exchange(
            flow.model_port, f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode()
        )
        assert status == 400, authority  # mitmproxy's reverse mode refuses it before any addon
        assert b"CONNECT" in answer
    assert flow.session.requests == 0 and flow.session.errors == []  # not a model call
    assert answered_ok(flow.model_port)


def test_absolute_form_targets_are_refused_and_a_model_call_among_them_fails_the_flow(
    harness: Harness, target: Listener
) -> None:
    flow = harness.open_flow()
    refused = "flowproof: absolute-form request lines are refused: this proxy is not a relay"
    for url in (
        "http://nowhere.invalid/v1/chat/completions",
        f"http://127.0.0.1:{target.port}/v1/chat/completions",
        "https://nowhere.invalid:8443/v1/messages",
    ):
        status, _, answer = exchange(flow.model_port, head(url, "Host: nowhere.invalid"))
        assert (status, json.loads(answer)["error"]["message"]) == (400, refused), url
    assert flow.session.errors == [refused] * 3  # each was a model call the agent lost
    status, _, _ = exchange(flow.model_port, head(f"http://127.0.0.1:{target.port}/", body=b""))
    assert status == 400 and len(flow.session.errors) == 3  # not a model route: not counted


def test_the_host_header_cannot_choose_a_target(harness: Harness, target: Listener) -> None:
    flow = harness.open_flow()
    for host in (f"127.0.0.1:{target.port}", "nowhere.invalid"):
        status, _, answer = exchange(flow.model_port, head(CHAT, f"Host: {host}"))
        assert status == 200 and json.loads(answer)["choices"][0]["message"]["content"] == "ok"
        harness.renew(flow)


# -- CRLF and other control characters in headers --------------------------------------------


@pytest.mark.parametrize("line", ["X-Trace: a\rb", "X-Trace: a\x00b", "X-Trace: a\x1b[31mred"])
def test_a_control_character_in_a_header_is_a_400_that_fails_the_flow(
    harness: Harness, line: str
) -> None:
    flow = harness.open_flow()
    status, _, answer = exchange(flow.model_port, head(CHAT, line))
    message = json.loads(answer)["error"]["message"]
    assert status == 400
    assert "carries a control character (CR, LF, NUL or another): it is refused" in message
    assert "\x1b" not in message and "\r" not in message
    assert flow.session.errors == [message]
    assert answered_ok(flow.model_port)


def test_a_cr_in_a_header_name_is_mitmproxys_400_and_fails_the_flow(harness: Harness) -> None:
    """No name at all: mitmproxy refuses the request head itself, before any addon."""
    flow = harness.open_flow()
    status, _, answer = exchange(flow.model_port, head(CHAT, "X-\rTrace: 1"))
    assert status == 400 and b"invalid header name" in answer
    (failure,) = flow.session.errors
    assert failure.startswith(f"flowproof: POST {CHAT} failed before flowproof could answer it")
    harness.renew(flow)
    assert answered_ok(flow.model_port)


def test_a_bare_lf_in_a_header_is_mitmproxys_400(harness: Harness) -> None:
    """A bare LF ends the header line early: mitmproxy cannot read the request head, so no
    flow exists for any addon to count. The turn it carried is simply never requested."""
    flow = harness.open_flow()
    status, _, answer = exchange(flow.model_port, head(CHAT, "X-Trace: a\nb"))
    assert status == 400 and b"Invalid header line" in answer
    assert flow.session.requests == 0 and flow.session.served == []
    assert answered_ok(flow.model_port)


# -- a slow client, hundreds of idle connections ----------------------------------------------


def test_a_slow_client_gets_its_answer_and_holds_up_nobody(harness: Harness) -> None:
    """The last few bytes arrive one a second; other requests are served meanwhile."""
    flow, other = harness.open_flow(), harness.open_flow()
    data = head(CHAT)
    served_meanwhile: list[bool] = []
    with socket.create_connection(("127.0.0.1", flow.model_port), timeout=30) as slow:
        slow.sendall(data[:-4])
        for byte in data[-4:]:
            served_meanwhile.append(answered_ok(other.model_port))
            harness.renew(other)
            time.sleep(1)
            slow.sendall(bytes([byte]))
        answer = slow.recv(65536)
    assert served_meanwhile == [True] * 4
    assert answer.startswith(b"HTTP/1.1 200 OK")
    assert flow.session.served == [0] and flow.session.errors == []


IDLE = 300


def test_hundreds_of_idle_connections_hold_up_nobody_and_close_with_their_flow(
    harness: Harness,
) -> None:
    flow, other = harness.open_flow(), harness.open_flow()
    idle = [
        socket.create_connection(("127.0.0.1", flow.model_port), timeout=20) for _ in range(IDLE)
    ]
    try:
        for number, sock in enumerate(idle):
            if number % 2:  # half send half a request head, half nothing at all
                sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\n".encode())
        assert answered_ok(flow.model_port)
        assert answered_ok(other.model_port)
        harness.close_flow(flow)
        assert all(read_until_closed(sock) == b"" for sock in idle)  # closed, none left hanging
    finally:
        for sock in idle:
            sock.close()
    harness.renew(other)
    assert answered_ok(other.model_port)


# -- property-based: random bodies at every model route and the MCP route --------------------


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)
MESSAGE_LIKE = st.fixed_dictionaries(
    {},
    optional={
        key: JSON_VALUES | st.sampled_from(["user", "assistant", "tool", "system", "model"])
        for key in ("role", "content", "tool_calls", "tool_call_id", "parts", "type", "name")
    },
)
FIELDS = ("model", "tools", "contents", "input", "system", "stream", "tool_choice", "instructions")
REQUEST_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "messages": st.lists(MESSAGE_LIKE, max_size=4) | JSON_VALUES,
        **{key: JSON_VALUES for key in FIELDS},
        "generationConfig": JSON_VALUES,
    },
)
BODIES = (
    st.binary(max_size=256)
    | JSON_VALUES.map(lambda value: json.dumps(value).encode())
    | REQUEST_LIKE.map(lambda value: json.dumps(value).encode())
)
ENCODINGS = st.sampled_from(["", "identity", "gzip", "gzip-lie", "br", "compress"])


def _encoded(body: bytes, encoding: str) -> tuple[bytes, dict[str, str]]:
    if encoding == "gzip":
        return gzip.compress(body), {"content-encoding": "gzip"}
    if encoding == "gzip-lie":
        return body, {"content-encoding": "gzip"}
    return body, ({"content-encoding": encoding} if encoding else {})


def _check_model_answer(session: CassetteSession, status: int, answer: Any) -> None:
    """The verdict agrees with the answer: served, diverged, or refused and failed."""
    if status == 200:
        assert session.served == [0] and session.errors == []
    elif status == 409:
        assert session.divergence is not None and session.errors == []
    else:
        assert status in REFUSALS, (status, answer)
        assert session.errors == [message_of(answer)]
    assert "Traceback" not in json.dumps(answer)


@pytest.fixture(scope="module")
def fuzzed(proxy: Harness) -> Iterator[tuple[Harness, OneFlow]]:
    """One flow for every example of a property; each example gets fresh sessions."""
    with one_test(proxy) as running:
        yield running, running.open_flow()


@settings(FUZZ, max_examples=200)
@given(path=st.sampled_from(MODEL_ROUTES), body=BODIES, encoding=ENCODINGS, mocked=st.booleans())
def test_random_bodies_at_every_model_route_are_answered_honestly(
    fuzzed: tuple[Harness, OneFlow], path: str, body: bytes, encoding: str, mocked: bool
) -> None:
    harness, flow = fuzzed
    session = CassetteSession(
        Mode.REPLAY, recorded=[turn()], mocks={"get_time": "noon"} if mocked else {}
    )
    harness.hub.model_sessions[flow.model_port] = session
    sent, headers = _encoded(body, encoding)
    status, _, answer = post(flow.model_port, path, sent, headers)
    _check_model_answer(session, status, answer)


LANE = {
    "calls": [
        {"method": "initialize", "params": {"protocolVersion": "2025-06-18"}, "result": {}},
        {"method": "tools/list", "result": {"tools": []}},
    ]
}
RPC_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | JSON_VALUES,
        "id": st.integers() | JSON_VALUES,
        "method": st.sampled_from(["initialize", "tools/list", "tools/call", "ping"]) | JSON_VALUES,
        "params": JSON_VALUES,
        "result": JSON_VALUES,
        "error": JSON_VALUES,
    },
)
MCP_BODIES = (
    st.binary(max_size=256)
    | RPC_LIKE.map(lambda value: json.dumps(value).encode())
    | st.lists(RPC_LIKE, max_size=3).map(lambda value: json.dumps(value).encode())
    | JSON_VALUES.map(lambda value: json.dumps(value).encode())
)
HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12)


#: The wordings an MCP 500 may carry (any other 500 is a bug the fuzz should show).
MCP_500_KINDS = (
    "could not handle the request",
    "but its body is not",  # says Content-Encoding: X, but its body is not X data
    "the body is JSON nested too deeply to read",
)


@settings(FUZZ, max_examples=150)
@given(
    body=MCP_BODIES,
    encoding=ENCODINGS,
    method=st.sampled_from(["POST", "POST", "POST", "DELETE", "PUT"]),
    mcp_method=st.none() | HEADER_TEXT,
)
def test_random_bodies_at_the_mcp_route_are_answered_honestly(
    fuzzed: tuple[Harness, OneFlow], body: bytes, encoding: str, method: str, mcp_method: Any
) -> None:
    harness, flow = fuzzed
    session = HttpReplaySession("files", lane=lane_from_document(LANE, "the fuzz lane"))
    harness.hub.mcp_sessions[flow.mcp_port] = session
    sent, headers = _encoded(body, encoding)
    headers = {**MCP_HEADERS, **headers, **({"mcp-method": mcp_method} if mcp_method else {})}
    status, answered, raw = request(flow.mcp_port, method, "/mcp", sent, headers)
    assert status != 502
    if raw:
        assert answered["content-type"].startswith(("application/json", "text/event-stream"))
    if status == 500:  # an exception while handling: the catch-all, or one worded for itself
        assert len(session.errors) == 1, session.errors
        assert any(kind in session.errors[0] for kind in MCP_500_KINDS), session.errors
    if status in (400, 415) and b'"jsonrpc"' in raw:
        assert session.errors or session.divergence  # a refusal fails the flow


class _Upstream:
    """A loopback model upstream answering every POST with the recorded answer (record)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        body = json.dumps(turn().response).encode()
        answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        answer += b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        with self.sock:
            while True:
                try:
                    connection, _ = self.sock.accept()
                except OSError:
                    return
                with connection:
                    received = b""
                    while b"\r\n\r\n" not in received and (chunk := connection.recv(65536)):
                        received += chunk
                    length = int(
                        next(
                            (
                                line.split(b":")[1]
                                for line in received.split(b"\r\n")
                                if line.lower().startswith(b"content-length:")
                            ),
                            b"0",
                        )
                    )
                    rest = received.partition(b"\r\n\r\n")[2]
                    while len(rest) < length and (chunk := connection.recv(65536)):
                        rest += chunk
                    connection.sendall(answer)


@pytest.fixture(scope="module")
def upstream() -> Iterator[_Upstream]:
    fake = _Upstream()
    yield fake
    fake.sock.close()


@settings(FUZZ, max_examples=60)
@given(path=st.sampled_from(MODEL_ROUTES), body=REQUEST_LIKE.map(lambda v: json.dumps(v).encode()))
def test_random_requests_at_record_are_forwarded_whole_or_refused(
    fuzzed: tuple[Harness, OneFlow], upstream: _Upstream, path: str, body: bytes
) -> None:
    """Record forwards a request only once it is read whole; an exception refuses it."""
    harness, flow = fuzzed
    session = CassetteSession(Mode.RECORD, upstream=Upstream(f"http://127.0.0.1:{upstream.port}"))
    harness.hub.model_sessions[flow.model_port] = session
    dials = len(harness.spy.dials)
    status, _, raw = request(flow.model_port, "POST", path, body, {})
    forwarded = harness.spy.dials[dials:]
    harness.spy.dials[dials:] = []  # the module fixture checks that nothing else was dialled
    if forwarded:
        assert {address[1] for address in forwarded} == {upstream.port}
        assert len(session.recorded) == 1 or session.errors
    else:
        assert status in REFUSALS and session.errors == [message_of(json.loads(raw))]
