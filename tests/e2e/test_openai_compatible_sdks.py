"""OpenAI-compatible services reached through their own SDKs (mistralai, groq, OpenRouter
through openai's client at its `/api/v1` root, a vLLM server with its own sampling fields):
each speaks the chat dialect at its own path. Record plain against the fake, stop it, then
replay offline twice: plain, and streamed (the stream flowproof synthesizes must be one that
SDK reads)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from flowproof_cli import trace as traces
from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, DEFAULT_STEPS, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

KEY = "compat-record-key-0123456789"
#: sdk -> (what its users set to reach the service, the path its requests take)
SDKS = {
    "mistralai": (
        {"MISTRAL_SERVER_URL": "${flowproof.proxy_url_no_v1}", "MISTRAL_API_KEY": "placeholder"},
        "/v1/chat/completions",
    ),
    "groq": (
        {"GROQ_BASE_URL": "${flowproof.proxy_url_no_v1}", "GROQ_API_KEY": "placeholder"},
        "/openai/v1/chat/completions",
    ),
    "openrouter": (
        {"OPENROUTER_BASE_URL": "${flowproof.proxy_url_no_v1}/api/v1"},
        "/api/v1/chat/completions",
    ),
    "vllm": ({"VLLM_BASE_URL": "${flowproof.proxy_url}"}, "/v1/chat/completions"),
}


def flow(folder: Path, sdk: str, *args: str) -> Path:
    parts = (sys.executable, str(AGENTS / "py_openai_compatible.py"), sdk, *args)
    command = " ".join(shlex.quote(part) for part in parts)
    return write_flow(folder, command=command, steps=DEFAULT_STEPS, env=SDKS[sdk][0])


@pytest.mark.parametrize("sdk", sorted(SDKS))
def test_sdk_records_through_the_chat_dialect_and_replays_plain_and_streamed(
    tmp_path: Path, sdk: str
) -> None:
    pytest.importorskip({"mistralai": "mistralai", "groq": "groq"}.get(sdk, "openai"))
    spec = flow(tmp_path, sdk)
    with FakeUpstream() as fake:
        env = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": KEY}
        result = run_cli("record", spec, env=env)
        assert result.code == 0, result.output
    sent = fake.model_requests()
    assert len(sent) == 2
    assert all(request.headers["authorization"] == f"Bearer {KEY}" for request in sent)
    trace = traces.load(spec.with_name("weather.trace.yaml"))
    assert [turn.protocol for turn in trace.turns] == ["openai-chat", "openai-chat"]
    if sdk == "vllm":  # its own sampling fields are part of the request, matched like any
        assert trace.turns[0].request["top_k"] == 20

    for args in ((), ("--stream",)):
        flow(tmp_path, sdk, *args)
        result = run_cli("run", spec)
        assert result.code == 0, f"{args}: {result.output}"
