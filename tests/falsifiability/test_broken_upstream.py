"""A broken model upstream at record: the agent sees what it said, the record fails, clearly.

Two levels. The session (`CassetteSession.on_upstream_response`) is fed every kind of broken
answer directly, and fuzzed with hypothesis: whatever the status and bytes, it never raises,
it hands the agent the upstream's status, and it counts a failure unless the answer is a 2xx
JSON object its dialect can read. Then the real CLI records against `tests/fakes/
broken_upstream.py` with a good trace in place: exit 1, a message naming the problem, the
agent's view (seen by a raw-HTTP agent), the old trace byte for byte, no temporary file.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Upstream
from flowproof_cli.cassette.upstream import upstream_from_environment
from flowproof_cli.dialects import Rendered
from flowproof_cli.errors import ConfigError
from flowproof_cli.trace import trace_path_for
from tests.conftest import run_cli
from tests.e2e.flows import write_flow
from tests.fakes.broken_upstream import GARBAGE, SSE_CUT, BrokenUpstream
from tests.fakes.fake_upstream import FakeUpstream, Reply

KEY = "sk-proj-broken0upstream0key0000000000"
CHAT_PATH = "/v1/chat/completions"
#: One request per dialect, as an agent sends it (Gemini streams by its path).
REQUESTS: dict[str, dict[str, Any]] = {
    CHAT_PATH: {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "m", "input": "hi"},
    "/v1/messages": {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
    },
    "/v1beta/models/g:generateContent": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    "/v1beta/models/g:streamGenerateContent?alt=sse": {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}]
    },
}
AGENT = Path(__file__).resolve().parent / "raw_model_agent.py"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def forwarded(path: str = CHAT_PATH, *, stream: bool = False) -> tuple[CassetteSession, Forward]:
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9/v1", KEY))
    body = dict(REQUESTS[path])
    if stream and "gemini" not in path and ":" not in path:
        body["stream"] = True
    outcome = session.on_request(path, json.dumps(body).encode())
    assert isinstance(outcome, Forward)
    return session, outcome


def answer(
    status: int, raw: bytes, headers: dict[str, str] | None = None, **kw: Any
) -> tuple[CassetteSession, Rendered]:
    session, forward = forwarded(**kw)
    return session, session.on_upstream_response(forward.pending, status, raw, headers or {})


def chat_reply(text: str = "hello") -> bytes:
    message = {"role": "assistant", "content": text}
    body = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
    return json.dumps(body).encode()


# --- the session ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 429, 500, 502, 503, 529])
def test_an_error_status_reaches_the_agent_and_fails_the_record(status: int) -> None:
    body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request"}}
    session, rendered = answer(status, json.dumps(body).encode())
    assert rendered.status == status
    assert json.loads(rendered.body) == body
    assert session.errors == [
        f"flowproof: the upstream model answered turn 1 with HTTP {status}: "
        "Incorrect API key provided"
    ]


def test_a_rate_limit_names_its_retry_after() -> None:
    session, rendered = answer(429, b'{"error":{"message":"slow down"}}', {"Retry-After": "7"})
    assert rendered.status == 429
    assert session.errors == [
        "flowproof: the upstream model answered turn 1 with HTTP 429 (Retry-After: 7): slow down"
    ]


def test_a_streamed_request_still_gets_the_error_as_json() -> None:
    session, rendered = answer(401, b'{"error":{"message":"no"}}', stream=True)
    assert (rendered.status, rendered.content_type) == (401, "application/json")
    assert session.errors and "HTTP 401" in session.errors[0]


@pytest.mark.parametrize(
    ("raw", "content_type", "shown"),
    [
        (GARBAGE, "application/json", "\\x00\ufffd<html>upstream \ufffd exploded{{{"),
        (SSE_CUT, "text/event-stream", 'data: {"id":"chatcmpl-1"'),
        (b"[1, 2]", "application/json", "[1, 2]"),
        (b"", "application/json", "(empty)"),
    ],
)
def test_a_success_that_is_not_a_json_object_fails_the_record(
    raw: bytes, content_type: str, shown: str
) -> None:
    session, rendered = answer(200, raw, {"content-type": content_type})
    assert (rendered.status, rendered.body) == (200, raw)  # the agent sees the very bytes
    assert rendered.content_type == content_type
    (error,) = session.errors
    assert error.startswith(
        "flowproof: the upstream model answered turn 1 with HTTP 200 but its body is not a "
        f"JSON object ({content_type}): "
    )
    assert shown in error


def test_an_answer_its_dialect_cannot_read_fails_instead_of_raising() -> None:
    session, rendered = answer(
        200, b'{"choices": 5}', {"content-type": "application/json"}, stream=True
    )
    assert (rendered.status, rendered.body) == (200, b'{"choices": 5}')
    (error,) = session.errors
    assert error.startswith(
        "flowproof: the upstream model's answer to turn 1 is not a valid openai-chat answer "
        "(TypeError: "
    )


#: Per dialect: a request with a number where a list is read, and the field named for it.
UNREADABLE = {
    CHAT_PATH: ({"model": "m", "messages": 1e30}, "messages"),
    "/v1/responses": ({"model": "m", "input": "hi", "tools": 7}, "tools"),
    "/v1/messages": ({"model": "m", "max_tokens": 5, "messages": 3}, "messages"),
    "/v1beta/models/g:generateContent": ({"contents": 5}, "contents"),
}


@pytest.mark.parametrize("mode", [Mode.RECORD, Mode.REPLAY])
@pytest.mark.parametrize("path", UNREADABLE)
def test_a_request_its_dialect_cannot_read_is_refused_as_the_agents(path: str, mode: Mode) -> None:
    body, field = UNREADABLE[path]
    upstream = Upstream("http://127.0.0.1:9/v1", KEY) if mode is Mode.RECORD else None
    session = CassetteSession(mode, upstream=upstream)
    outcome = session.on_request(path, json.dumps(body).encode())
    assert isinstance(outcome, Rendered) and outcome.status == 400
    (failure,) = session.errors
    assert failure.startswith(f"flowproof: the agent's request to {path} is not a ")
    assert f"request: its `{field}` is the number " in failure
    assert json.dumps(failure) in outcome.body.decode()  # the agent is told the same


def test_after_a_timeout_further_requests_get_the_same_error_unforwarded() -> None:
    session, forward = forwarded()
    first = session.on_upstream_error(forward.pending, "no answer within 1 s", timed_out=True)
    again = session.on_request(CHAT_PATH, json.dumps(REQUESTS[CHAT_PATH]).encode())
    assert isinstance(again, Rendered) and again.status == first.status == 502
    assert again.body == first.body
    assert set(session.errors) == {
        "flowproof: could not reach the upstream model: no answer within 1 s"
    }


def test_another_upstream_error_leaves_further_requests_forwarded() -> None:
    session, forward = forwarded()
    session.on_upstream_error(forward.pending, "server closed connection")
    again = session.on_request(CHAT_PATH, json.dumps(REQUESTS[CHAT_PATH]).encode())
    assert isinstance(again, Forward)


def test_the_key_an_upstream_echoes_never_reaches_the_message() -> None:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    session, _ = answer(401, body)
    assert KEY not in session.errors[0]
    assert "[redacted]" in session.errors[0]


def test_terminal_escapes_in_a_body_are_shown_escaped() -> None:
    session, _ = answer(502, b"\x1b[2J\x1b]0;pwned\x07 bad gateway")
    assert "\x1b" not in session.errors[0] and "\x07" not in session.errors[0]
    assert r"\x1b[2J" in session.errors[0]


def test_a_long_body_is_clipped_in_the_message() -> None:
    session, _ = answer(500, b"x" * 100_000)
    assert len(session.errors[0]) < 600


def test_a_good_answer_is_recorded_without_error() -> None:
    session, rendered = answer(200, chat_reply(), {"content-type": "application/json"})
    assert rendered.status == 200 and session.errors == []
    assert session.trajectory().reply == "hello"


@FUZZ
@given(status=st.integers(100, 599), raw=st.binary(max_size=300))
def test_any_status_and_bytes_never_raise_and_keep_the_status(status: int, raw: bytes) -> None:
    session, rendered = answer(status, raw)
    assert rendered.status == status
    if not (200 <= status < 300 and _is_object(raw)):
        assert session.errors


JSON_KEYS = st.sampled_from(
    [
        "choices",
        "message",
        "content",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "delta",
        "output",
        "type",
        "text",
        "candidates",
        "parts",
        "functionCall",
        "args",
        "role",
        "id",
        "usage",
        "stop_reason",
        "input",
        "status",
        "index",
        "finish_reason",
    ]
) | st.text(max_size=3)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_KEYS, inner, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(
    path=st.sampled_from(sorted(REQUESTS)),
    stream=st.booleans(),
    body=st.dictionaries(JSON_KEYS, JSON, max_size=5),
)
def test_any_json_object_answer_never_raises(path: str, stream: bool, body: dict[str, Any]) -> None:
    """A 200 JSON object of any shape: rendered for the agent or counted as a failure, and
    the verdict's trajectory is readable when it was not."""
    session, rendered = answer(200, json.dumps(body).encode(), path=path, stream=stream)
    assert rendered.status == 200
    if not session.errors:
        session.trajectory()


def _is_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


# --- the record timeout's configuration ----------------------------------------------------

BASE = {"FLOWPROOF_AGENT_UPSTREAM": "http://127.0.0.1:9/v1"}


def test_the_upstream_timeout_defaults_and_reads_its_variable() -> None:
    assert upstream_from_environment(BASE).timeout_s == 120
    assert upstream_from_environment({**BASE, "FLOWPROOF_UPSTREAM_TIMEOUT": "2.5"}).timeout_s == 2.5


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon", ""])
def test_a_bad_upstream_timeout_variable_is_a_config_error(value: str) -> None:
    environ = {**BASE, "FLOWPROOF_UPSTREAM_TIMEOUT": value}
    if value == "":  # an empty variable is unset
        assert upstream_from_environment(environ).timeout_s == 120
        return
    with pytest.raises(ConfigError) as caught:
        upstream_from_environment(environ)
    assert str(caught.value) == (
        f"FLOWPROOF_UPSTREAM_TIMEOUT is {value!r}: set it to the seconds record waits for "
        "each answer of the upstream model, a number > 0 (e.g. 120)"
    )


# --- the real CLI against a broken upstream ------------------------------------------------


def _flow(folder: Path, timeout: float = 60, body: str | None = None) -> Path:
    """The raw agent's flow; `body`: what it posts instead of its good request."""
    env = {"AGENT_SEEN": str(folder / "seen.json")}
    if body is not None:
        env["AGENT_BODY"] = body
    spec = {
        "name": "broken upstream probe",
        "app": "agent",
        "timeout": timeout,
        "agent": {
            "command": f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}",
            "env": env,
        },
        "steps": [{"prompt": "Say hello."}],
    }
    path = folder / "probe.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _record(spec: Path, base_url: str, *extra: str, **env: str):
    variables = {"FLOWPROOF_AGENT_UPSTREAM": f"{base_url}/v1", "FLOWPROOF_AGENT_KEY": KEY, **env}
    return run_cli("record", spec, *extra, env=variables, timeout=45)


@pytest.fixture
def good(tmp_path: Path) -> tuple[Path, bytes]:
    """A flow with a good trace already recorded beside it."""
    spec = _flow(tmp_path)
    with FakeUpstream(seed=3) as fake:
        result = _record(spec, fake.base_url)
    assert result.code == 0, result.output
    return spec, spec.with_name("probe.trace.yaml").read_bytes()


def _seen(spec: Path) -> dict[str, Any]:
    return json.loads(spec.with_name("seen.json").read_text())


def _untouched(spec: Path, trace: bytes) -> None:
    assert spec.with_name("probe.trace.yaml").read_bytes() == trace
    left = sorted(p.name for p in spec.parent.iterdir())
    assert left == [".flowproof", "probe.flow.yaml", "probe.trace.yaml", "seen.json"]


BROKEN = [
    pytest.param(
        {"mode": "status", "status": 401},
        401,
        "answered turn 1 with HTTP 401: Incorrect API key provided",
        id="401",
    ),
    pytest.param(
        {"mode": "status", "status": 429, "headers": {"Retry-After": "7"}},
        429,
        "answered turn 1 with HTTP 429 (Retry-After: 7): Incorrect API key provided",
        id="429",
    ),
    pytest.param({"mode": "status", "status": 500}, 500, "answered turn 1 with HTTP 500", id="500"),
    pytest.param({"mode": "status", "status": 503}, 503, "answered turn 1 with HTTP 503", id="503"),
    pytest.param(
        {"mode": "garbage"}, 200, "HTTP 200 but its body is not a JSON object", id="garbage"
    ),
    pytest.param(
        {"mode": "sse-cut"},
        200,
        "HTTP 200 but its body is not a JSON object (text/event-stream)",
        id="sse-cut",
    ),
    pytest.param(
        {"mode": "drop"},
        502,
        "could not reach the upstream model: HTTP/1 protocol error: peer closed connection "
        "without sending complete message body",
        id="drop-mid-body",
    ),
    pytest.param(
        {"mode": "close"},
        502,
        "could not reach the upstream model: server closed connection",
        id="close",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("failure", "agent_status", "message"), BROKEN)
def test_record_against_a_broken_upstream_fails_and_keeps_the_trace(
    good: tuple[Path, bytes], failure: dict[str, Any], agent_status: int, message: str
) -> None:
    spec, trace = good
    with BrokenUpstream(failure.pop("mode"), **failure) as upstream:
        result = _record(spec, upstream.base_url, "--yes")
        assert len(upstream.requests) == 1  # the agent's call reached it, once
    assert result.code == 1, result.output
    assert result.stdout.startswith("FAIL: broken upstream probe - flowproof: ")
    assert message in result.stdout
    assert "no trace written" in result.stdout
    assert "Traceback" not in result.output and KEY not in result.output
    assert _seen(spec)["status"] == agent_status
    _untouched(spec, trace)


@pytest.mark.slow
def test_the_agent_sees_the_upstream_401_body_and_the_429_retry_after(
    good: tuple[Path, bytes],
) -> None:
    spec, _ = good
    with BrokenUpstream("status", status=401) as upstream:
        _record(spec, upstream.base_url)
    seen = _seen(spec)
    assert seen["status"] == 401
    assert json.loads(seen["body"])["error"]["message"] == "Incorrect API key provided"
    limits = {"Retry-After": "7", "x-ratelimit-remaining-requests": "0"}
    with BrokenUpstream("status", status=429, headers=limits) as upstream:
        _record(spec, upstream.base_url)
    seen = _seen(spec)
    assert seen["status"] == 429
    assert seen["headers"]["retry-after"] == "7"
    assert seen["headers"]["x-ratelimit-remaining-requests"] == "0"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_silent_upstream_ends_at_the_upstream_timeout(good: tuple[Path, bytes], how: str) -> None:
    """The flow's own timeout is 60 s and the CLI is given 45: only the upstream timeout can
    end this record in time."""
    spec, trace = good
    extra = ("--upstream-timeout", "1") if how == "flag" else ()
    env = {"FLOWPROOF_UPSTREAM_TIMEOUT": "1"} if how == "variable" else {}
    with BrokenUpstream("hang") as upstream:
        result = _record(spec, upstream.base_url, *extra, **env)
    assert result.code == 1, result.output
    assert (
        "could not reach the upstream model: no answer within 1 s (set the wait with "
        "--upstream-timeout SECONDS or FLOWPROOF_UPSTREAM_TIMEOUT)"
    ) in result.stdout
    assert _seen(spec)["status"] == 502
    _untouched(spec, trace)


@pytest.mark.slow
def test_after_an_upstream_timeout_the_sdk_retries_are_answered_at_once(tmp_path: Path) -> None:
    """The openai SDK retries a 502 twice by default: each retry waited the whole upstream
    timeout again (a default record against a silent upstream took 301 s, the flow's
    timeout). Once the upstream timed out, the flow's further requests get the same error
    at once (with `x-should-retry: false`), so the upstream sees the one request."""
    spec = write_flow(tmp_path, env={"AGENT_SDK_RETRIES": "2"})
    with BrokenUpstream("hang") as upstream:
        result = _record(spec, upstream.base_url, "--upstream-timeout", "1")
        assert len(upstream.requests) == 1, result.output
    assert result.code == 1, result.output
    timeout = (
        "flowproof: could not reach the upstream model: no answer within 1 s (set the wait "
        "with --upstream-timeout SECONDS or FLOWPROOF_UPSTREAM_TIMEOUT)"
    )
    assert result.stdout.startswith(f"FAIL: weather flow - {timeout}\n"), result.output
    assert "also:" not in result.stdout  # the same error, said once
    assert "no trace written" in result.stdout
    assert not trace_path_for(spec).exists()


#: An agent's request whose `messages` is no list: what its dialect cannot read.
MALFORMED = '{"model": "gpt-4o-mini", "messages": 1e30}'
BLAMED = (
    "flowproof: the agent's request to /v1/chat/completions is not a valid openai-chat "
    "request: its `messages` is the number 1e+30, which the openai-chat dialect cannot read "
    "(TypeError: 'float' object is not iterable); it was refused, not "
)


@pytest.mark.slow
def test_an_agent_request_its_dialect_cannot_read_is_the_agents_at_record(
    good: tuple[Path, bytes],
) -> None:
    """It was forwarded, and the upstream's good answer was then blamed: "the upstream
    model's answer to turn 1 is not a valid openai-chat answer"."""
    spec, trace = good
    _flow(spec.parent, body=MALFORMED)
    with FakeUpstream(script=lambda dialect, body: Reply(text="Hello")) as fake:
        result = _record(spec, fake.base_url)
        assert fake.model_requests() == []  # refused, never forwarded
    assert result.code == 1, result.output
    assert result.stdout.startswith(f"FAIL: broken upstream probe - {BLAMED}forwarded\n")
    assert "upstream model's answer" not in result.output
    seen = _seen(spec)
    assert seen["status"] == 400
    assert json.loads(seen["body"])["error"]["message"] == f"{BLAMED}forwarded"
    _untouched(spec, trace)


@pytest.mark.slow
def test_an_agent_request_its_dialect_cannot_read_is_the_agents_at_replay(
    good: tuple[Path, bytes],
) -> None:
    """It was "could not handle the request ... it was refused, not forwarded", a fault of
    flowproof's own by its wording."""
    spec, trace = good
    _flow(spec.parent, body=MALFORMED)
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert result.stdout.startswith(f"FAIL: broken upstream probe - {BLAMED}matched\n")
    assert _seen(spec)["status"] == 400
    _untouched(spec, trace)


@pytest.mark.slow
def test_a_flow_timeout_while_the_upstream_is_silent_says_so(good: tuple[Path, bytes]) -> None:
    spec, trace = good
    with BrokenUpstream("hang") as upstream:
        result = _record(spec, upstream.base_url, "--timeout", "2")
    assert result.code == 1, result.output
    assert "the agent closed its connection before the upstream model answered" in result.stdout
    assert spec.with_name("probe.trace.yaml").read_bytes() == trace


@pytest.mark.slow
@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "later"])
def test_a_bad_upstream_timeout_flag_is_exit_2(tmp_path: Path, value: str) -> None:
    result = _record(_flow(tmp_path), "http://127.0.0.1:9", "--upstream-timeout", value)
    assert result.code == 2
    assert "--upstream-timeout" in result.stderr
    assert "a number of seconds > 0" in result.stderr
    assert "Traceback" not in result.stderr
