"""One upstream per provider, through real SDKs: Azure OpenAI (Python `AzureOpenAI` on its
deployment and Responses routes, the /openai/v1 API, Node's `AzureOpenAI`) and an agent
that plans with OpenAI and writes with Anthropic. Each records against its provider's own
fake (which refuses the wrong auth), replays offline twice, and fails naming a change."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, CliResult, run_cli
from tests.e2e.flows import AGENTS, set_agent_env, write_flow
from tests.fakes.azure_upstream import AzureUpstream
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AZURE_KEY = "azure-record-key-0123456789"
OPENAI_KEY = "sk-openai-record-0123456789"
ANTHROPIC_KEY = "sk-ant-record-0123456789"
PROMPT = "What's the weather in Nairobi right now? Use both tools."
NODE_MODULES = REPO / "tests" / "node_modules"


def _trace(spec: Path) -> dict:
    return yaml.safe_load(spec.with_name("weather.trace.yaml").read_text())


def _azure_flow(folder: Path, command: str, **env: str) -> Path:
    steps = [
        {"prompt": PROMPT},
        {"assert_tool_call": "get_weather where city equals Nairobi"},
        {"assert": "reply contains sunny"},
    ]
    return write_flow(folder, command=command, steps=steps, env=env)


def _record_with_azures_own_upstream(
    spec: Path, azure: AzureUpstream, route: str = "UPSTREAM_AZURE", key: str = "KEY_AZURE"
) -> None:
    """Record with FLOWPROOF_UPSTREAM_AZURE and its key alone (or the variables `route` and
    `key` name); the fake refused nothing."""
    env = {f"FLOWPROOF_{route}": azure.base_url, f"FLOWPROOF_{key}": AZURE_KEY}
    recorded = run_cli("record", spec, env=env)
    assert recorded.code == 0, recorded.output
    assert azure.refused == []


def _a_changed_deployment_fails(spec: Path, variable: str, recorded: str, replayed: str) -> None:
    set_agent_env(spec, **{variable: replayed})
    changed = run_cli("run", spec)
    assert changed.code == 1, changed.output
    assert "divergence at turn 1: request parameters changed: deployment: recorded " in (
        changed.stdout
    )
    assert f"{recorded}, replayed {replayed}" in changed.stdout


def _replays_twice(spec: Path) -> None:
    for _ in range(2):  # offline: no upstream variable at all
        replay = run_cli("run", spec)
        assert replay.code == 0, replay.output


AZURE_APIS = {
    "chat": ("azure-chat", "weather-gpt"),
    "chat-stream": ("azure-chat", "weather-gpt"),
    "responses": ("azure-responses", None),
    "v1-chat": ("azure-chat", None),
}


@pytest.mark.parametrize("api", AZURE_APIS)
def test_azure_openai_records_with_its_own_upstream_and_replays(tmp_path: Path, api: str) -> None:
    protocol, deployment = AZURE_APIS[api]
    command = f"{sys.executable} {AGENTS / 'py_azure_openai.py'}"
    spec = _azure_flow(tmp_path, command, AGENT_API=api)
    with AzureUpstream(key=AZURE_KEY) as azure:
        # No FLOWPROOF_AGENT_UPSTREAM: Azure's own upstream is enough.
        _record_with_azures_own_upstream(spec, azure)
    assert len(azure.model_requests()) >= 2
    for request in azure.model_requests():  # the key only in api-key, never Bearer
        assert request.headers.get("api-key") == AZURE_KEY
        assert "authorization" not in request.headers
        assert "stream" not in request.body  # record forwards the non-streaming twin
    assert set(azure.deployments_seen) == {deployment}
    turns = _trace(spec)["turns"]
    assert {turn["protocol"] for turn in turns} == {protocol}
    assert AZURE_KEY not in spec.with_name("weather.trace.yaml").read_text()
    if deployment is not None:
        assert all(turn["request"]["deployment"] == deployment for turn in turns)
    _replays_twice(spec)


def test_an_azure_rag_agent_records_its_embedding_beside_the_chat_and_replays(
    tmp_path: Path,
) -> None:
    """Embeddings under their own deployment: a turn of their own, the deployment matched."""
    command = f"{sys.executable} {AGENTS / 'py_azure_openai.py'}"
    spec = _azure_flow(tmp_path, command, AGENT_API="rag")
    with AzureUpstream(key=AZURE_KEY, deployments={"weather-gpt", "embed-small"}) as azure:
        _record_with_azures_own_upstream(spec, azure)
    assert azure.deployments_seen[0] == "embed-small"
    turns = _trace(spec)["turns"]
    assert [turn["protocol"] for turn in turns][:2] == ["azure-embeddings", "azure-chat"]
    assert turns[0]["request"]["deployment"] == "embed-small"
    assert "deployment" not in azure.requests[0].body  # Azure reads it from the URL
    assert AZURE_KEY not in spec.with_name("weather.trace.yaml").read_text()
    _replays_twice(spec)

    _a_changed_deployment_fails(spec, "EMBED_DEPLOYMENT", "embed-small", "embed-large")


@pytest.mark.parametrize("api", ["completions", "completions-stream"])
def test_azure_legacy_completions_record_and_replay_and_a_changed_deployment_fails(
    tmp_path: Path, api: str
) -> None:
    """`AzureOpenAI(...).completions.create` under its own deployment, plain and streamed:
    record forwards the plain call (the fake refuses a streamed one) with the key in
    `api-key`; the draft goes into the chat's system prompt, so a replay that passes
    served it; offline it replays, then in the other form; a changed deployment fails
    naming it."""
    command = f"{sys.executable} {AGENTS / 'py_azure_openai.py'}"
    spec = _azure_flow(tmp_path, command, AGENT_API=api)
    with AzureUpstream(key=AZURE_KEY, deployments={"weather-gpt", "instruct"}) as azure:
        _record_with_azures_own_upstream(spec, azure)
    assert azure.deployments_seen == ["instruct", "weather-gpt", "weather-gpt"]
    first = azure.requests[0]
    assert first.path.startswith("/openai/deployments/instruct/completions?api-version=")
    assert first.headers.get("api-key") == AZURE_KEY and "authorization" not in first.headers
    assert "stream" not in first.body and "deployment" not in first.body
    turns = _trace(spec)["turns"]
    assert [turn["protocol"] for turn in turns] == ["azure-completions", *["azure-chat"] * 2]
    assert turns[0]["request"]["deployment"] == "instruct"
    drafted = turns[0]["response"]["body"]["choices"][0]["text"]
    assert turns[1]["request"]["messages"][0]["content"].endswith(f"Draft:{drafted}")
    assert AZURE_KEY not in spec.with_name("weather.trace.yaml").read_text()
    for form in (api, "completions" if api.endswith("stream") else f"{api}-stream"):
        set_agent_env(spec, AGENT_API=form)  # offline, then with the other form
        replay = run_cli("run", spec)
        assert replay.code == 0, replay.output
    if api.endswith("stream"):
        return
    _a_changed_deployment_fails(spec, "COMPLETIONS_DEPLOYMENT", "instruct", "instruct-canary")


def test_the_default_upstream_serves_azure_too_with_its_key_in_api_key(tmp_path: Path) -> None:
    """The issue's reproduction: with FLOWPROOF_AGENT_UPSTREAM at the resource, record used
    to forward to `<resource>/chat/completions` (the deployment dropped) with the key as
    Bearer, and Azure refused it."""
    command = f"{sys.executable} {AGENTS / 'py_azure_openai.py'}"
    spec = _azure_flow(tmp_path, command, AGENT_API="chat")
    with AzureUpstream(key=AZURE_KEY) as azure:
        _record_with_azures_own_upstream(spec, azure, "AGENT_UPSTREAM", "AGENT_KEY")
    assert set(azure.deployments_seen) == {"weather-gpt"}


def test_a_changed_azure_deployment_fails_the_replay_naming_it(tmp_path: Path) -> None:
    command = f"{sys.executable} {AGENTS / 'py_azure_openai.py'}"
    spec = _azure_flow(tmp_path, command, AGENT_API="chat")
    with AzureUpstream(key=AZURE_KEY, deployments={"weather-gpt"}) as azure:
        _record_with_azures_own_upstream(spec, azure)
    set_agent_env(spec, AZURE_DEPLOYMENT="weather-gpt-canary")
    replay = run_cli("run", spec)
    assert replay.code == 1, replay.output
    # Only the path changed (the body's model is the same): the deployment is matched.
    assert "deployment" in replay.output, replay.output
    assert "weather-gpt-canary" in replay.output


def test_a_bearer_key_is_what_azure_refuses(tmp_path: Path) -> None:
    """The fake's own check: the key as Bearer on Azure's key route is a 401 (so a passing
    record above proves the key went in `api-key`)."""
    import json
    import urllib.error
    import urllib.request

    with AzureUpstream(key=AZURE_KEY) as azure:
        request = urllib.request.Request(
            f"{azure.base_url}/openai/deployments/weather-gpt/chat/completions"
            "?api-version=2024-10-21",
            data=json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"authorization": f"Bearer {AZURE_KEY}", "content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 401


def test_node_azure_openai_records_and_replays(tmp_path: Path) -> None:
    if not NODE_MODULES.exists() or shutil.which("node") is None:
        pytest.skip("Node agents need `npm ci` in tests/ and node on PATH")
    spec = _azure_flow(tmp_path, f"node {AGENTS / 'node_azure_openai.mjs'}")
    with AzureUpstream(key=AZURE_KEY) as azure:
        _record_with_azures_own_upstream(spec, azure)
    assert set(azure.deployments_seen) == {"weather-gpt"}
    _replays_twice(spec)
    set_agent_env(spec, AZURE_DEPLOYMENT="weather-gpt-canary")
    replay = run_cli("run", spec)
    assert replay.code == 1 and "weather-gpt-canary" in replay.output, replay.output


# --- two providers, two upstreams -------------------------------------------------------------


def _two_provider_flow(folder: Path) -> Path:
    steps = [
        {"prompt": "What's the weather in Nairobi?"},
        {"assert_tool_call": "get_weather where city equals Nairobi"},
        {"assert": "reply contains sunny"},
    ]
    command = f"{sys.executable} {AGENTS / 'py_two_providers.py'}"
    return write_flow(folder, command=command, steps=steps)


def _record_two_providers(spec: Path, openai: FakeUpstream, **anthropic: str) -> CliResult:
    """Record with OpenAI's own upstream and key, and `anthropic` as more FLOWPROOF_*
    variables (named without the prefix)."""
    env = {"FLOWPROOF_UPSTREAM_OPENAI": f"{openai.base_url}/v1", "FLOWPROOF_KEY_OPENAI": OPENAI_KEY}
    env.update({f"FLOWPROOF_{name}": value for name, value in anthropic.items()})
    return run_cli("record", spec, env=env)


def test_an_agent_on_two_providers_records_with_two_upstreams_and_replays(tmp_path: Path) -> None:
    spec = _two_provider_flow(tmp_path)
    with FakeUpstream() as openai, FakeUpstream() as anthropic:
        anthropics = {"UPSTREAM_ANTHROPIC": anthropic.base_url, "KEY_ANTHROPIC": ANTHROPIC_KEY}
        recorded = _record_two_providers(spec, openai, **anthropics)
    assert recorded.code == 0, recorded.output
    assert {r.dialect for r in openai.model_requests()} == {"chat"}
    assert {r.dialect for r in anthropic.model_requests()} == {"anthropic"}
    for request in openai.model_requests():  # each key only to its own provider
        assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
        assert "x-api-key" not in request.headers
    for request in anthropic.model_requests():
        assert request.headers["x-api-key"] == ANTHROPIC_KEY
        assert "authorization" not in request.headers
    protocols = [turn.get("protocol", "openai-chat") for turn in _trace(spec)["turns"]]
    assert protocols == ["openai-chat", "openai-chat", "anthropic"]
    _replays_twice(spec)


def test_a_provider_without_an_upstream_fails_the_record_naming_the_variable(
    tmp_path: Path,
) -> None:
    spec = _two_provider_flow(tmp_path)
    with FakeUpstream() as openai:
        misspelt = {"UPSTREAM_ANTROPIC": "http://127.0.0.1:9"}
        recorded = _record_two_providers(spec, openai, **misspelt)
    assert recorded.code == 1, recorded.output
    assert (
        "record has no upstream for anthropic requests: set FLOWPROOF_UPSTREAM_ANTHROPIC"
    ) in recorded.output
    assert (
        "FLOWPROOF_UPSTREAM_ANTROPIC names no provider flowproof knows, so it is ignored (did "
        "you mean FLOWPROOF_UPSTREAM_ANTHROPIC?)"
    ) in recorded.output
    assert not spec.with_name("weather.trace.yaml").exists()
    assert OPENAI_KEY not in recorded.output


# --- doctor names the provider each request spoke ---------------------------------------------


def test_doctor_names_each_requests_provider() -> None:
    command = f"{sys.executable} {AGENTS / 'py_two_providers.py'}"
    result = run_cli("doctor", "--agent", command, env={"FLOWPROOF_KEY_AZURE": AZURE_KEY})
    assert result.code == 0, result.output
    assert "    POST /v1/chat/completions: 1 (openai-chat, provider openai)" in result.stdout
    assert "    POST /v1/messages: 1 (anthropic, provider anthropic)" in result.stdout
    azure = run_cli("doctor", "--agent", f"{sys.executable} {AGENTS / 'py_azure_openai.py'}")
    assert azure.code == 0, azure.output
    assert (
        "    POST /openai/deployments/weather-gpt/chat/completions: 1 (azure-chat, provider azure)"
    ) in azure.stdout
