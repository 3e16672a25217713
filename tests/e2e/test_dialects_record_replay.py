"""Every dialect real agents speak, through real SDKs: record against the fake, stop it,
replay offline; then the red paths of each dialect."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli import trace as traces
from tests.conftest import NODE_MODULES, computed_once, run_cli
from tests.e2e.flows import (
    AGENTS,
    changed_system_prompt_fails,
    copy_recording,
    edit_trace,
    recorded_on_fake,
    replay_fails,
    replays_with_env,
    trace_path,
    write_flow,
)
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

SYSTEM_PROMPT = "You are a weather assistant. Use the tools."
PROMPT = "What's the weather in Nairobi right now? Use both tools."

# agent script -> the protocol its turns must be recorded under
AGENT_PROTOCOLS = {
    "py_openai_chat.py": "openai-chat",
    "py_openai_chat_stream.py": "openai-chat",
    "py_openai_responses.py": "openai-responses",
    "py_openai_responses_stream.py": "openai-responses",
    "py_anthropic.py": "anthropic",
    "py_anthropic_stream.py": "anthropic",
    "py_openai_agents.py": "openai-responses",
    "py_openai_agents_stream.py": "openai-responses",
    "py_langchain.py": "openai-chat",
    "py_pydantic_ai_responses.py": "openai-responses",
    "py_pydantic_ai_chat.py": "openai-chat",
    "node_openai_chat_stream.mjs": "openai-chat",
    "node_anthropic_stream.mjs": "anthropic",
    "node_ai_sdk_openai.mjs": "openai-responses",
    "node_ai_sdk_anthropic.mjs": "anthropic",
}


def command_for(script: str) -> str:
    path = AGENTS / script
    if script.endswith(".mjs"):
        if not NODE_MODULES.exists() or shutil.which("node") is None:
            pytest.skip("Node agents need `npm ci` in tests/ (make test runs it) and node on PATH")
        return f"node {path}"
    return f"{sys.executable} {path}"


def flow_for(folder: Path, script: str, **extra: Any) -> Path:
    steps = [
        {"prompt": PROMPT},
        {"assert_tool_call": "get_weather where city equals Nairobi"},
        {"assert": "reply contains sunny"},
    ]
    return write_flow(folder, command=command_for(script), steps=steps, **extra)


def record(spec: Path) -> None:
    recorded_on_fake(spec, "sk-x", "/v1")


# How a user wires an agent whose client reads a variable differently: a runtime handle.
AGENT_ENV = {"node_ai_sdk_anthropic.mjs": {"ANTHROPIC_BASE_URL": "${flowproof.proxy_url}"}}


def recorded_once(script: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's flow recorded once per session (`computed_once`): its folder, never
    written to again. The record/replay test below and the red paths share it."""

    def record_once() -> str:
        spec = flow_for(tmp_path_factory.mktemp("recording"), script, env=AGENT_ENV.get(script, {}))
        record(spec)
        return str(spec.parent)

    return Path(computed_once(tmp_path_factory, f"dialects-{script}", record_once))


@pytest.mark.parametrize("script", sorted(AGENT_PROTOCOLS))
def test_real_sdk_records_and_replays_offline(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, script: str
) -> None:
    spec = copy_recording(recorded_once(script, tmp_path_factory), tmp_path)
    trace = traces.load(trace_path(spec))
    assert {turn.protocol for turn in trace.turns} == {AGENT_PROTOCOLS[script]}
    assert len(trace.turns) >= 2
    text = trace_path(spec).read_text()
    assert "sk-x" not in text and "flowproof-placeholder-key" not in text
    assert '"now":"2026-01-01T09:00:00Z"' in text  # get_time's volatile result was mocked

    result = run_cli("run", spec)  # the fake is stopped: replay must need nothing
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS: weather flow")


# -- red paths, in each dialect, by editing what was recorded -----------------------------

RED_PATH_AGENTS = ["py_openai_chat.py", "py_openai_responses.py", "py_anthropic.py"]


def _city_type_integer(value: Any) -> Any:
    if (
        isinstance(value, dict)
        and value.get("type") == "string"
        and "city" not in value
        and value.keys() <= {"type", "description", "title"}
    ):
        return {**value, "type": "integer"}
    return value


def _nairobi_to_paris(value: Any) -> Any:
    if isinstance(value, str) and "Nairobi" in value:
        return value.replace("Nairobi", "Paris")
    return value


@pytest.fixture(params=RED_PATH_AGENTS)
def recorded_flow(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The test's own copy of the agent's recording (the one its record/replay test made)."""
    assert not AGENT_ENV.get(request.param), "the red paths edit the plain flow's recording"
    return copy_recording(recorded_once(request.param, tmp_path_factory), tmp_path)


def test_changed_system_prompt_diverges(recorded_flow: Path) -> None:
    changed_system_prompt_fails(recorded_flow, SYSTEM_PROMPT)


def test_changed_tool_schema_diverges(recorded_flow: Path) -> None:
    edit_trace(recorded_flow, requests=_city_type_integer)
    replay_fails(
        recorded_flow,
        "divergence at turn 1: tools offered changed: the declaration of get_weather changed",
        "city.type: recorded integer, replayed string",
    )


def test_changed_argument_names_the_path(recorded_flow: Path) -> None:
    edit_trace(recorded_flow, first_response=_nairobi_to_paris)
    replay_fails(
        recorded_flow,
        "divergence at turn 2: tool-call arguments drifted in message 2 (assistant): "
        "get_weather.city: recorded Nairobi, replayed Paris",
    )


@pytest.mark.parametrize(
    ("recorded_with", "replayed_with", "expected"),
    [
        (
            "py_openai_chat.py",
            "py_openai_responses.py",
            "recorded openai-chat, replayed openai-responses",
        ),
        ("py_anthropic.py", "py_openai_chat.py", "recorded anthropic, replayed openai-chat"),
        (
            "py_openai_responses.py",
            "py_anthropic.py",
            "recorded openai-responses, replayed anthropic",
        ),
    ],
)
def test_protocol_changed_diverges_first(
    tmp_path: Path, recorded_with: str, replayed_with: str, expected: str
) -> None:
    spec = flow_for(tmp_path, recorded_with)
    record(spec)
    flow_for(tmp_path, replayed_with)  # same flow, the agent now speaks another dialect
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert f"divergence at turn 1: protocol changed: {expected}" in result.stdout


def test_stream_is_transport_a_plain_recording_serves_a_streaming_client(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, "py_anthropic.py")
    record(spec)
    flow_for(tmp_path, "py_anthropic_stream.py")
    result = run_cli("run", spec)
    assert result.code == 0, result.output

    chat = write_flow(tmp_path, name="chat")  # the tool-loop agent, its answers not streamed
    record(chat)
    replays_with_env(chat, AGENT_STREAM="1")


def test_a_streaming_recording_serves_a_plain_client(tmp_path: Path) -> None:
    chat = write_flow(tmp_path, name="chat", env={"AGENT_STREAM": "1"})
    record(chat)
    replays_with_env(chat, AGENT_STREAM="")


@pytest.mark.parametrize(
    ("script", "agent_auth"),
    [("py_anthropic.py", "authorization"), ("node_ai_sdk_anthropic.mjs", "x-api-key")],
)
def test_anthropic_record_sends_the_key_as_x_api_key(
    tmp_path: Path, script: str, agent_auth: str
) -> None:
    """Whichever auth style the agent's SDK uses, upstream gets only flowproof's key, as
    x-api-key, with the agent's own anthropic-version; the trace holds neither key."""
    spec = flow_for(tmp_path, script, env=AGENT_ENV.get(script, {}))
    with FakeUpstream() as fake:
        result = run_cli(
            "record",
            spec,
            env={"FLOWPROOF_AGENT_UPSTREAM": fake.base_url, "FLOWPROOF_AGENT_KEY": "sk-ant-real"},
        )
        requests = fake.model_requests()
    assert result.code == 0, result.output
    assert requests and all(r.path == "/v1/messages" for r in requests)
    for request in requests:
        assert request.headers.get("x-api-key") == "sk-ant-real"
        assert "authorization" not in request.headers
        assert request.headers.get("anthropic-version")
    text = trace_path(spec).read_text()
    assert "sk-ant-real" not in text and "flowproof-placeholder-key" not in text
