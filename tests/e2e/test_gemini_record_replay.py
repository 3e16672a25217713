"""The Gemini dialect through the real google-genai SDK: record against the fake (whose base
URL has no /v1: the SDK's path carries its API version), stop it, replay offline; then the
red paths, by editing what was recorded."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli import trace as traces
from flowproof_cli.cassette import Turn
from tests.conftest import computed_once, run_cli
from tests.e2e import flows
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

pytest.importorskip("google.genai")

SYSTEM_PROMPT = "You are a weather assistant. Use the tools."
PROMPT = "What's the weather in Nairobi right now? Use both tools."
GEMINI_AGENTS = ["py_google_genai.py", "py_google_genai_stream.py"]


def flow_for(folder: Path, script: str) -> Path:
    steps = [
        {"prompt": PROMPT},
        {"assert_tool_call": "get_weather where city equals Nairobi"},
        {"assert_tool_call": "get_time"},
        {"assert": "reply contains sunny"},
    ]
    return flows.write_flow(
        folder, command=f"{sys.executable} {flows.AGENTS / script}", steps=steps
    )


def record(spec: Path) -> FakeUpstream:
    return flows.recorded_on_fake(spec, "gm-secret")


def function_responses(turn: Turn) -> dict[str, Any]:
    return {
        part["functionResponse"]["name"]: part["functionResponse"]["response"]
        for content in turn.request["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    }


@pytest.mark.parametrize("script", GEMINI_AGENTS)
def test_google_genai_records_and_replays_offline(tmp_path: Path, script: str) -> None:
    spec = flow_for(tmp_path, script)
    fake = record(spec)

    upstream = fake.model_requests()
    assert len(upstream) == 2
    for request in upstream:  # record always asks the upstream for the plain answer
        assert request.path == "/v1/models/gemini-2.5-flash:generateContent"
        assert request.headers["x-goog-api-key"] == "gm-secret"
        assert "model" not in request.body and "stream" not in request.body

    trace = traces.load(flows.trace_path(spec))
    assert [turn.protocol for turn in trace.turns] == ["gemini", "gemini"]
    assert all(turn.request["model"] == "gemini-2.5-flash" for turn in trace.turns)
    assert all("stream" not in turn.request for turn in trace.turns)
    text = flows.trace_path(spec).read_text()
    assert "gm-secret" not in text and "flowproof-placeholder-key" not in text
    # get_time's volatile result was mocked: the model was told the mock, verbatim
    results = function_responses(trace.turns[1])
    assert results["get_time"] == {"now": "2026-01-01T09:00:00Z"}
    assert results["get_weather"] == {"city": "Nairobi", "forecast": "sunny"}

    result = run_cli("run", spec)  # the fake is stopped: replay must need nothing
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS: weather flow")


def test_a_plain_recording_serves_the_streaming_client(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, "py_google_genai.py")
    record(spec)
    flow_for(tmp_path, "py_google_genai_stream.py")  # same flow, the agent now streams
    result = run_cli("run", spec)
    assert result.code == 0, result.output


# -- red paths -------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=GEMINI_AGENTS)
def recording(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each agent's flow recorded once per session (`computed_once`): its folder, never
    written to again."""
    script = request.param

    def record_once() -> str:
        spec = flow_for(tmp_path_factory.mktemp("recording"), script)
        record(spec)
        return str(spec.parent)

    return Path(computed_once(tmp_path_factory, f"gemini-{script}", record_once))


@pytest.fixture
def recorded_flow(recording: Path, tmp_path: Path) -> Path:
    """The test's own copy of the recorded flow and trace, to edit and replay."""
    return flows.copy_recording(recording, tmp_path)


def test_changed_system_instruction_diverges(recorded_flow: Path) -> None:
    result = flows.changed_system_prompt_fails(recorded_flow, SYSTEM_PROMPT)
    assert f"replayed: {SYSTEM_PROMPT}" in result.stdout


def test_changed_argument_names_the_path(recorded_flow: Path) -> None:
    flows.edit_trace(
        recorded_flow,
        first_response=lambda v: v.replace("Nairobi", "Paris") if isinstance(v, str) else v,
    )
    flows.replay_fails(
        recorded_flow,
        "divergence at turn 2: tool-call arguments drifted in message 2 (model): "
        "get_weather.city: recorded Nairobi, replayed Paris",
    )


def test_protocol_changed_diverges_first(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, "py_google_genai.py")
    record(spec)
    flows.write_flow(  # same flow, the agent now speaks OpenAI Chat Completions
        tmp_path,
        command=f"{sys.executable} {flows.AGENTS / 'py_openai_chat.py'}",
        steps=[{"prompt": PROMPT}],
    )
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert (
        "divergence at turn 1: protocol changed: recorded gemini, replayed openai-chat"
        in result.stdout
    )
