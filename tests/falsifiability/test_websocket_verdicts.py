"""Every verdict of the Responses API's WebSocket transport can fail, and fails only for its
reason: each red case through the real CLI, with its twin (the one change undone) passing.

The agent is tests/e2e/agents/py_responses_websocket.py (frames as Codex CLI sends them);
the upstream tests/fakes/responses_ws_upstream.py (it checks the key on the upgrade).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.e2e.test_responses_websocket import KEY, flow, record, set_env
from tests.fakes.fake_upstream import Reply
from tests.fakes.responses_ws_upstream import ResponsesWebSocketUpstream

pytestmark = pytest.mark.slow

#: What each case's flow must fail with (test_completeness.py reads these as case messages).
MESSAGES = {
    "unreadable frame": (
        "the agent's WebSocket frame on /v1/responses is not a Responses request: its `type` "
        "is \"response.cancel\", not 'response.create'; it was refused"
    ),
    "upstream error event": "the upstream model answered turn 1 with HTTP 429",
    "upgrade refused": (
        "flowproof: the upstream model refused the WebSocket upgrade of /v1/responses with HTTP 401"
    ),
    "unknown transport": "turn 1 is malformed: its `transport` is 'carrier-pigeon'",
}


def _recorded(folder: Path, **env: str) -> Path:
    spec = flow(folder, **env)
    with ResponsesWebSocketUpstream(api_key=KEY) as fake:
        recorded = record(spec, fake)
    assert recorded.code == 0, recorded.output
    return spec


@pytest.mark.parametrize("twin", [False, True], ids=["red", "twin"])
def test_an_unreadable_frame_fails_the_flow(tmp_path: Path, twin: bool) -> None:
    spec = _recorded(tmp_path)
    set_env(spec, **({} if twin else {"WS_RAW_FRAME": '{"type": "response.cancel"}'}))
    replayed = run_cli("run", spec)
    if twin:
        assert replayed.code == 0, replayed.output
        return
    assert replayed.code == 1, replayed.output
    assert MESSAGES["unreadable frame"] in replayed.stdout, replayed.output


@pytest.mark.parametrize("twin", [False, True], ids=["red", "twin"])
def test_an_upstream_error_event_fails_the_record(tmp_path: Path, twin: bool) -> None:
    spec = flow(tmp_path)
    script: Any = None if twin else (lambda dialect, body: Reply(status=429))
    with ResponsesWebSocketUpstream(script=script, api_key=KEY) as fake:
        recorded = record(spec, fake)
    trace = spec.with_name("weather.trace.yaml")
    if twin:
        assert recorded.code == 0, recorded.output
        assert trace.exists()
        return
    assert recorded.code == 1, recorded.output
    assert MESSAGES["upstream error event"] in recorded.stdout, recorded.output
    assert not trace.exists()


@pytest.mark.parametrize("twin", [False, True], ids=["red", "twin"])
def test_an_upgrade_the_upstream_refuses_fails_the_record(tmp_path: Path, twin: bool) -> None:
    spec = flow(tmp_path)
    with ResponsesWebSocketUpstream(api_key=KEY if twin else "sk-another-key") as fake:
        recorded = record(spec, fake)
    if twin:
        assert recorded.code == 0, recorded.output
        return
    assert recorded.code == 1, recorded.output
    assert MESSAGES["upgrade refused"] in recorded.stdout, recorded.output
    assert KEY not in recorded.output


@pytest.mark.parametrize("twin", [False, True], ids=["red", "twin"])
def test_a_trace_naming_an_unknown_transport_is_refused(tmp_path: Path, twin: bool) -> None:
    spec = _recorded(tmp_path)
    path = spec.with_name("weather.trace.yaml")
    if not twin:
        edited = path.read_text().replace("transport: websocket", "transport: carrier-pigeon", 1)
        path.write_text(edited)
    replayed = run_cli("run", spec)
    if twin:
        assert replayed.code == 0, replayed.output
        return
    assert replayed.code == 2, replayed.output
    assert MESSAGES["unknown transport"] in replayed.output
    assert f"{path.name}:" in replayed.output  # FILE:LINE of the turn
