"""The Responses API over WebSocket: a client speaking it the way Codex CLI does
(tests/e2e/agents/py_responses_websocket.py: an upgrade, `response.create` frames chained by
`previous_response_id`, an optional `generate: false` warm-up, HTTP after a 426) recorded
against a fake that speaks it (tests/fakes/responses_ws_upstream.py: connection-local
continuations, the key checked on the upgrade), replayed offline twice, mutated, and the
trace read both ways across the transports; then the red paths."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult, run_cli
from tests.e2e.flows import AGENTS, write_flow
from tests.fakes.broken_upstream import BrokenUpstream
from tests.fakes.fake_upstream import Reply
from tests.fakes.responses_ws_upstream import WEBSOCKET, ResponsesWebSocketUpstream

pytestmark = pytest.mark.slow

KEY = "sk-proj-websocket0record0key000000000"
AGENT = f"{sys.executable} {AGENTS / 'py_responses_websocket.py'}"
STEPS: list[dict[str, Any]] = [
    {"prompt": "What's the weather in Nairobi right now? Use both tools."},
    {"assert_tool_call": "get_weather where city equals Nairobi"},
    {"assert": "reply contains sunny"},
]


def flow(folder: Path, **env: str) -> Path:
    return write_flow(folder, command=AGENT, env=env, tools=[], steps=STEPS)


def record(spec: Path, fake: ResponsesWebSocketUpstream) -> Any:
    upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": KEY}
    return run_cli("record", spec, env=upstream)


def trace_of(spec: Path) -> dict[str, Any]:
    path = spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml"))
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def set_env(spec: Path, **env: str) -> None:
    document = yaml.safe_load(spec.read_text())
    document["agent"]["env"] = env
    spec.write_text(yaml.safe_dump(document, sort_keys=False))


def test_records_over_the_socket_and_replays_offline_twice(tmp_path: Path) -> None:
    spec = flow(tmp_path, WS_WARMUP="1")
    with ResponsesWebSocketUpstream(api_key=KEY) as fake:
        recorded = record(spec, fake)
        frames = fake.frames()
    assert recorded.code == 0, recorded.output
    # The fake answered frames, not HTTP: the warm-up, then two continuations on one socket
    # (the fake refuses a `previous_response_id` of another connection when store is false).
    assert [frame.method for frame in fake.requests] == [WEBSOCKET] * 3
    assert frames[0].body["generate"] is False
    assert frames[2].body["previous_response_id"] is not None
    assert [upgrade["authorization"] for upgrade in fake.upgrades] == [f"Bearer {KEY}"]
    turns = trace_of(spec)["turns"]
    assert [turn.get("transport") for turn in turns] == ["websocket"] * 3
    assert turns[0]["request"]["generate"] is False
    assert KEY not in spec.with_name("weather.trace.yaml").read_text()
    for _ in range(2):  # the fake is gone: every answer comes from the trace
        replayed = run_cli("run", spec)
        assert replayed.code == 0, replayed.output
        assert replayed.stdout.startswith("PASS: "), replayed.output
        assert "426" not in replayed.output


def test_a_changed_frame_diverges_naming_the_change(tmp_path: Path) -> None:
    spec = flow(tmp_path)
    with ResponsesWebSocketUpstream(api_key=KEY) as fake:
        assert record(spec, fake).code == 0
    set_env(spec, WS_CITY="Quito")
    replayed = run_cli("run", spec)
    assert replayed.code == 1, replayed.output
    assert "divergence at turn 1" in replayed.stdout, replayed.output
    assert "Nairobi" in replayed.stdout and "Quito" in replayed.stdout, replayed.output


def test_a_trace_recorded_over_http_sends_the_socket_client_to_http(tmp_path: Path) -> None:
    """A client that fell back to HTTP at record (or never dialed the socket) is answered
    426 at replay too, so it asks what it asked then; the notes say so."""
    spec = flow(tmp_path, WS_HTTP="1")
    with ResponsesWebSocketUpstream(api_key=KEY) as fake:
        assert record(spec, fake).code == 0
    assert "transport" not in trace_of(spec)["turns"][0]
    set_env(spec)  # the client now dials the socket: answered 426, it uses HTTP
    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output
    assert (
        "the agent's WebSocket upgrade of /v1/responses was answered 426, so it used HTTP: "
        "the trace was recorded over HTTP"
    ) in replayed.stdout, replayed.output


TIMED_OUT = "could not reach the upstream model: no answer within 1 s"


def record_within_1_s(spec: Path, base_url: str) -> CliResult:
    """Record with flowproof's key and an `--upstream-timeout` of 1 s."""
    upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{base_url}/v1", "FLOWPROOF_AGENT_KEY": KEY}
    return run_cli("record", "--upstream-timeout", "1", spec, env=upstream)


def test_a_silent_upstream_fails_the_record_at_the_upstream_timeout(tmp_path: Path) -> None:
    """A frame forwarded at record is bounded by `--upstream-timeout` as an HTTP call is."""
    spec = flow(tmp_path)

    def silent(dialect: str, body: dict[str, Any]) -> Reply:
        time.sleep(4)
        return Reply(text="too late")

    with ResponsesWebSocketUpstream(script=silent, api_key=KEY) as fake:
        recorded = record_within_1_s(spec, fake.base_url)
    assert recorded.code == 1, recorded.output
    assert TIMED_OUT in recorded.stdout, recorded.output


def test_an_upstream_that_never_answers_the_upgrade_fails_the_record(tmp_path: Path) -> None:
    spec = flow(tmp_path)
    with BrokenUpstream("hang") as hung:
        recorded = record_within_1_s(spec, hung.base_url)
    assert recorded.code == 1, recorded.output
    assert TIMED_OUT in recorded.stdout, recorded.output


def test_a_fault_on_a_socket_call_answers_as_over_http(tmp_path: Path) -> None:
    """A status fault is the Responses error event on the socket (this agent exits on it, at
    record and at replay alike); a delay is the recorded answer, late."""
    (tmp_path / "status").mkdir()
    (tmp_path / "delay").mkdir()
    status = write_flow(
        tmp_path / "status",
        command=AGENT,
        tools=[],
        steps=[{"prompt": STEPS[0]["prompt"]}, {"assert": "exit code equals 1"}],
        faults=[{"at": "model call 1", "answer": 500}],
    )
    delayed = write_flow(
        tmp_path / "delay",
        command=AGENT,
        tools=[],
        steps=STEPS,
        faults=[{"at": "model call 2", "delay": 0.5}],
    )
    for spec in (status, delayed):
        with ResponsesWebSocketUpstream(api_key=KEY) as fake:
            recorded = record(spec, fake)
        assert recorded.code == 0, recorded.output
        replayed = run_cli("run", spec)
        assert replayed.code == 0, replayed.output
    assert trace_of(status)["turns"][0]["transport"] == "websocket"
    assert trace_of(delayed)["turns"][1]["fault"] == "model call 2: delay: 0.5"


SDK_AGENT = f"{sys.executable} {AGENTS / 'py_responses_websocket_sdk.py'}"
RESET = {"at": "model call 2", "connection": "reset"}
SOCKET_CLOSED = "agent error: ConnectionClosedError: no close frame received or sent"


def test_a_reset_on_a_socket_call_closes_it_and_the_sdk_client_raises(tmp_path: Path) -> None:
    """A `connection: reset` at a socket call ends the agent's socket without an answer or
    a close frame, and the openai SDK's `responses.connect()` client raises
    `ConnectionClosedError`: at record (the flow fails with the agent's exit) and at replay
    (`flowproof chaos`: every cell crashed) alike. The same flow without the fault passes.
    (Killing the flow alone left the socket open and the client waiting until killed.) The
    30 s bound only tells a hang from a crash: a crash comes within the agent's start and two
    calls, which took more than 3 s at `-n 3` on two busy cores, and near 10 s on a loaded
    machine three times slower; a passing run never waits for it."""
    (tmp_path / "clean").mkdir()
    (tmp_path / "reset").mkdir()
    clean = write_flow(tmp_path / "clean", command=SDK_AGENT, tools=[], steps=STEPS, timeout=30)
    with ResponsesWebSocketUpstream(api_key=KEY) as fake:
        assert record(clean, fake).code == 0
    assert [turn["transport"] for turn in trace_of(clean)["turns"]] == ["websocket"] * 2
    assert run_cli("run", clean).code == 0  # the red path: without the fault it passes
    swept = run_cli("chaos", clean, "--kinds", "reset", "--timeout", "30", "-j", "2", "--json")
    assert swept.code == 0, swept.output
    cells = [(cell["call"], cell["outcome"]) for cell in json.loads(swept.stdout)["cells"]]
    assert cells == [("model call 1", "crashed"), ("model call 2", "crashed")], swept.stdout
    faulted = write_flow(
        tmp_path / "reset", command=SDK_AGENT, tools=[], steps=STEPS, timeout=30, faults=[RESET]
    )
    with ResponsesWebSocketUpstream(api_key=KEY) as fake:
        recorded = record(faulted, fake)
        assert len(fake.frames()) == 1  # the faulted frame was never forwarded, nor resent
    assert recorded.code == 1, recorded.output
    assert SOCKET_CLOSED in recorded.stdout, recorded.output
    assert "fault: model call 2: connection: reset: 1 attempt(s) faulted" in recorded.stdout
    assert "Traceback" not in recorded.output
