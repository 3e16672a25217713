"""Ollama's native API and Cohere v2 through their real Python clients: record against a
fake of each provider (which checks the auth it expects), stop it, replay offline twice,
streamed and not; then a mutation that fails naming the change."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli import trace as traces
from flowproof_cli.runner.environment import injected_variables
from tests.conftest import REPO, CliResult, run_cli
from tests.e2e.flows import AGENTS, set_agent_env, write_flow
from tests.fakes.cohere_upstream import FakeCohere
from tests.fakes.fake_upstream import Reply
from tests.fakes.ollama_upstream import FakeOllama

pytestmark = pytest.mark.slow

pytest.importorskip("ollama")
pytest.importorskip("cohere")

PROMPT = "What's the weather in Nairobi right now? Use both tools."
KEY = "co-record-key-0123456789"
STEPS: list[dict[str, Any]] = [
    {"prompt": PROMPT},
    {"assert_tool_call": "get_weather where city equals Nairobi"},
    {"assert_tool_call": "get_time"},
    {"assert": "reply contains sunny"},
]
#: What the clients read: nothing to set where flowproof injects it (then these tests prove
#: the injection), else mapped in the spec.
_INJECTED = injected_variables(1, "")
OLLAMA_ENV = {} if "OLLAMA_HOST" in _INJECTED else {"OLLAMA_HOST": "${flowproof.proxy_url_no_v1}"}
COHERE_ENV = (
    {}
    if {"CO_API_URL", "CO_API_KEY"} <= set(_INJECTED)
    else {"CO_API_URL": "${flowproof.proxy_url_no_v1}", "CO_API_KEY": "placeholder"}
)


def flow(folder: Path, script: str, *args: str, env: dict[str, str]) -> Path:
    command = " ".join(shlex.quote(part) for part in (sys.executable, str(AGENTS / script), *args))
    return write_flow(folder, command=command, steps=STEPS, env=env)


def trace_of(spec: Path) -> traces.Trace:
    return traces.load(spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml")))


def recorded(spec: Path, base_url: str, provider: str, key: str | None = None) -> CliResult:
    """Record against the fake at `base_url`, routed as `provider`'s upstream (and `key` as
    flowproof's key for it); the result."""
    env = {"FLOWPROOF_AGENT_UPSTREAM": base_url, f"FLOWPROOF_UPSTREAM_{provider}": base_url}
    if key is not None:
        env.update(FLOWPROOF_AGENT_KEY=key, **{f"FLOWPROOF_KEY_{provider}": key})
    return run_cli("record", spec, env=env)


def record(spec: Path, base_url: str, provider: str, key: str | None = None) -> None:
    result = recorded(spec, base_url, provider, key)
    assert result.code == 0, result.output


def replays_twice(spec: Path, then: Callable[[], object] | None = None) -> None:
    """Replay with the fake stopped (replay must need nothing), then again after `then`
    rewrote the flow (the agent now streams, or no longer does: `stream` is transport)."""
    for step in (None, then):
        if step is not None:
            step()
        result = run_cli("run", spec)
        assert result.code == 0, result.output
        assert result.stdout.startswith("PASS: weather flow")


def replays_twice_then_switched(
    spec: Path, script: str, *args: str, stream: bool, env: dict[str, str]
) -> None:
    """`replays_twice`, the second replay with `script` (given `args`) switched to the
    other transport: streamed if it was recorded plain (`stream` false), plain if not."""
    switched = [] if stream else ["--stream"]
    replays_twice(spec, lambda: flow(spec.parent, script, *args, *switched, env=env))


# -- Ollama ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_ollama_client_records_and_replays_offline(tmp_path: Path, stream: bool) -> None:
    spec = flow(tmp_path, "py_ollama.py", *(["--stream"] if stream else []), env=OLLAMA_ENV)
    with FakeOllama() as fake:
        record(spec, fake.base_url, "OLLAMA")
    sent = fake.model_requests()
    assert [request.path for request in sent] == ["/api/chat", "/api/chat"]
    # record asks for the plain answer whatever the agent asked; no placeholder travels
    assert all(request.body["stream"] is False for request in sent)
    assert all("authorization" not in request.headers for request in sent)
    trace = trace_of(spec)
    assert [turn.protocol for turn in trace.turns] == ["ollama-chat", "ollama-chat"]
    assert all("stream" not in turn.request for turn in trace.turns)
    results = [m for m in trace.turns[1].request["messages"] if m["role"] == "tool"]
    assert {m["tool_name"]: m["content"] for m in results}["get_time"] == (
        '{"now":"2026-01-01T09:00:00Z"}'
    )  # get_time was mocked: the model was told the mock
    replays_twice_then_switched(spec, "py_ollama.py", stream=stream, env=OLLAMA_ENV)


def test_ollama_cloud_key_travels_as_bearer(tmp_path: Path) -> None:
    """Ollama's cloud takes a Bearer key: the fake refuses a request without it."""
    spec = flow(tmp_path, "py_ollama.py", env=OLLAMA_ENV)
    with FakeOllama(key=KEY) as fake:
        record(spec, fake.base_url, "OLLAMA", key=KEY)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.model_requests())
    assert KEY not in spec.with_name("weather.trace.yaml").read_text()


def test_ollama_changed_tool_declaration_diverges(tmp_path: Path) -> None:
    spec = flow(tmp_path, "py_ollama.py", env=OLLAMA_ENV)
    with FakeOllama() as fake:
        record(spec, fake.base_url, "OLLAMA")
    path = spec.with_name("weather.trace.yaml")
    path.write_text(path.read_text().replace("Current weather for a city.", "Weather now."))
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert (
        "divergence at turn 1: tools offered changed: the declaration of get_weather changed"
        in result.stdout
    )


# -- Cohere ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_cohere_sdk_records_and_replays_offline(tmp_path: Path, stream: bool) -> None:
    spec = flow(tmp_path, "py_cohere.py", *(["--stream"] if stream else []), env=COHERE_ENV)
    with FakeCohere(key=KEY) as fake:
        record(spec, fake.base_url, "COHERE", key=KEY)
    assert [request.path for request in fake.requests] == ["/v2/chat", "/v2/chat"]
    for request in fake.requests:  # the key in its one header; the plain answer asked for
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert request.body["stream"] is False
    trace = trace_of(spec)
    assert [turn.protocol for turn in trace.turns] == ["cohere-chat", "cohere-chat"]
    text = spec.with_name("weather.trace.yaml").read_text()
    assert KEY not in text and "placeholder" not in text
    results = [m for m in trace.turns[1].request["messages"] if m["role"] == "tool"]
    assert '{"now":"2026-01-01T09:00:00Z"}' in [m["content"] for m in results]
    replays_twice_then_switched(spec, "py_cohere.py", stream=stream, env=COHERE_ENV)


def test_cohere_changed_user_message_diverges(tmp_path: Path) -> None:
    spec = flow(tmp_path, "py_cohere.py", env=COHERE_ENV)
    with FakeCohere(key=KEY) as fake:
        record(spec, fake.base_url, "COHERE", key=KEY)
    result = _replayed_with_lagos(spec)
    assert "divergence at turn 1: message 1 (user) content changed" in result.stdout


# -- retrieval: embeddings and rerank beside the chat --------------------------------------


def _replayed_with_lagos(spec: Path) -> CliResult:
    """The flow replayed with its task asking about another city: a failure."""
    document = yaml.safe_load(spec.read_text())
    document["steps"][0]["prompt"] = PROMPT.replace("Nairobi", "Lagos")
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    return result


def test_ollama_embed_is_a_turn_of_its_own_and_a_changed_input_fails(tmp_path: Path) -> None:
    spec = flow(tmp_path, "py_ollama.py", "--embed", env=OLLAMA_ENV)
    with FakeOllama() as fake:
        record(spec, fake.base_url, "OLLAMA")
    trace = trace_of(spec)
    assert [turn.protocol for turn in trace.turns] == ["ollama-embed", *["ollama-chat"] * 2]
    assert trace.turns[0].request == {"model": "nomic-embed-text", "input": [PROMPT]}
    replays_twice(spec)  # the reply is still the chat's: the embedding never stands for it

    result = _replayed_with_lagos(spec)
    assert "divergence at turn 1: the ollama-embed `input` content changed" in result.stdout
    assert "replayed What's the weather in Lagos right now?" in result.stdout


def test_cohere_embed_and_rerank_record_and_replay(tmp_path: Path) -> None:
    spec = flow(tmp_path, "py_cohere.py", "--embed", "--stream", env=COHERE_ENV)
    with FakeCohere(key=KEY) as fake:
        record(spec, fake.base_url, "COHERE", key=KEY)
    assert [r.path for r in fake.requests] == ["/v2/embed", "/v2/rerank", "/v2/chat", "/v2/chat"]
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.requests)
    trace = trace_of(spec)
    assert [turn.protocol for turn in trace.turns] == [
        "cohere-embed",
        "cohere-rerank",
        "cohere-chat",
        "cohere-chat",
    ]
    replays_twice(spec, lambda: flow(tmp_path, "py_cohere.py", "--embed", env=COHERE_ENV))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_ollama_generate_records_and_replays_plain_and_streamed(
    tmp_path: Path, stream: bool
) -> None:
    """The module-level `ollama.generate` (NDJSON by default when streamed): a turn of its
    own, its answer in the chat's system prompt, so a replay that passes served it."""
    streamed = ["--stream"] if stream else []
    spec = flow(tmp_path, "py_ollama.py", "--generate", *streamed, env=OLLAMA_ENV)
    with FakeOllama() as fake:
        record(spec, fake.base_url, "OLLAMA")
    sent = fake.model_requests()
    assert [r.path for r in sent] == ["/api/generate", "/api/chat", "/api/chat"]
    assert all(request.body["stream"] is False for request in sent)
    trace = trace_of(spec)
    assert [turn.protocol for turn in trace.turns] == ["ollama-generate", *["ollama-chat"] * 2]
    assert trace.turns[0].request == {"model": "llama3.2", "prompt": f"Notes on: {PROMPT}"}
    system = trace.turns[1].request["messages"][0]["content"]
    assert system.endswith(f"Notes: Draft for: {f'Notes on: {PROMPT}'[-40:]}")
    replays_twice_then_switched(spec, "py_ollama.py", "--generate", stream=stream, env=OLLAMA_ENV)

    result = _replayed_with_lagos(spec)
    assert "divergence at turn 1: the ollama-generate `prompt` content changed" in result.stdout
    assert "replayed: Notes on: What's the weather in Lagos right now?" in result.stdout


def test_cohere_v1_rerank_records_and_replays_and_a_changed_document_list_fails(
    tmp_path: Path,
) -> None:
    """The v1 client's `cohere.Client().rerank` (`/v1/rerank`) beside a v2 chat: the ranking
    goes into the chat's system prompt, so a replay that passes served it from the trace."""
    spec = flow(tmp_path, "py_cohere.py", "--rerank-v1", env=COHERE_ENV)
    with FakeCohere(key=KEY) as fake:
        record(spec, fake.base_url, "COHERE", key=KEY)
    assert [r.path for r in fake.requests] == ["/v1/rerank", "/v2/chat", "/v2/chat"]
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.requests)
    trace = trace_of(spec)
    assert [t.protocol for t in trace.turns] == ["cohere-rerank-v1", "cohere-chat", "cohere-chat"]
    assert trace.turns[0].request["query"] == PROMPT
    system = trace.turns[1].request["messages"][0]["content"]
    assert "Most relevant note: Nairobi weather notes: the long rains start in March." in system
    assert KEY not in spec.with_name("weather.trace.yaml").read_text()
    replays_twice(spec)

    set_agent_env(spec, EXTRA_NOTE="Lagos is humid.")
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert "divergence at turn 1: the cohere-rerank-v1 `documents` content changed" in (
        result.stdout
    )
    assert "Lagos is humid." in result.stdout


# -- red paths -----------------------------------------------------------------------------


def test_a_refused_cohere_key_fails_the_record_naming_the_upstreams_answer(
    tmp_path: Path,
) -> None:
    spec = flow(tmp_path, "py_cohere.py", env=COHERE_ENV)
    with FakeCohere(key="the-right-key-0123456789") as fake:
        result = recorded(spec, fake.base_url, "COHERE", key=KEY)
    assert result.code == 1, result.output
    assert "the upstream model answered turn 1 with HTTP 401" in result.stdout
    assert "invalid api token" in result.stdout
    assert not spec.with_name("weather.trace.yaml").exists()


def test_an_ollama_model_not_found_fails_the_record_naming_it(tmp_path: Path) -> None:
    def missing(body: dict[str, Any]) -> Reply:
        message = f'model "{body["model"]}" not found, try pulling it first'
        return Reply(status=404, error_body={"error": message})

    spec = flow(tmp_path, "py_ollama.py", env=OLLAMA_ENV)
    with FakeOllama(missing) as fake:
        result = recorded(spec, fake.base_url, "OLLAMA")
    assert result.code == 1, result.output
    assert 'HTTP 404: model "llama3.2" not found, try pulling it first' in result.stdout
    assert not spec.with_name("weather.trace.yaml").exists()


def test_an_ollama_route_flowproof_does_not_record_fails_the_flow_naming_it(
    tmp_path: Path,
) -> None:
    """`GET /api/tags` lists models: no model call. The agent goes on without it, and still
    the flow fails, naming the path: never a silent pass."""
    spec = flow(tmp_path, "py_ollama.py", "--list", env=OLLAMA_ENV)
    with FakeOllama() as fake:
        result = recorded(spec, fake.base_url, "OLLAMA")
    assert result.code == 1, result.output
    assert "GET /api/tags is not a model endpoint flowproof records" in result.stdout
    assert all(request.path != "/api/tags" for request in fake.requests)  # never forwarded


# -- the Node clients ------------------------------------------------------------------------

NODE_MODULES = REPO / "tests" / "node_modules"
needs_node = pytest.mark.skipif(
    shutil.which("node") is None
    or not (NODE_MODULES / "ollama").exists()
    or not (NODE_MODULES / "cohere-ai").exists(),
    reason="node, or the ollama and cohere-ai packages of tests/node_modules, are not installed",
)
#: The JS clients read neither OLLAMA_HOST nor CO_API_URL themselves: their agents pass them
#: on (node_ollama.mjs, node_cohere.mjs), so flowproof's injection reaches them that way.


def node_flow(folder: Path, script: str, *args: str, env: dict[str, str]) -> Path:
    parts = (shutil.which("node") or "node", str(AGENTS / script), *args)
    command = " ".join(shlex.quote(part) for part in parts)
    return write_flow(folder, command=command, steps=STEPS, env=env)


@needs_node
def test_node_ollama_client_records_and_replays_plain_and_streamed(tmp_path: Path) -> None:
    spec = node_flow(tmp_path, "node_ollama.mjs", env=OLLAMA_ENV)
    with FakeOllama() as fake:
        record(spec, fake.base_url, "OLLAMA")
    assert [r.path for r in fake.model_requests()] == ["/api/chat", "/api/chat"]
    assert [turn.protocol for turn in trace_of(spec).turns] == ["ollama-chat", "ollama-chat"]
    replays_twice(spec, lambda: node_flow(tmp_path, "node_ollama.mjs", "--stream", env=OLLAMA_ENV))


@needs_node
def test_node_cohere_client_records_and_replays_plain_and_streamed(tmp_path: Path) -> None:
    spec = node_flow(tmp_path, "node_cohere.mjs", env=COHERE_ENV)
    with FakeCohere(key=KEY) as fake:
        record(spec, fake.base_url, "COHERE", key=KEY)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.requests)
    assert [turn.protocol for turn in trace_of(spec).turns] == ["cohere-chat", "cohere-chat"]
    replays_twice(spec, lambda: node_flow(tmp_path, "node_cohere.mjs", "--stream", env=COHERE_ENV))
