"""The endpoints around chat through the real SDKs (openai, anthropic, google-genai): record
against the fake (which checks each provider's auth header), stop it, replay offline twice;
a changed question (embedding input, counted messages) fails naming the change; a path no
dialect speaks fails the flow naming it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from flowproof_cli import trace as traces
from flowproof_cli.evidence.timeline import timeline
from tests.conftest import run_cli
from tests.e2e.flows import (
    AGENTS,
    record_on_fake,
    recorded_on_fake,
    replays_with_env,
    trace_path,
    write_flow,
)
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

QUESTION = "What is the refund policy?"
PROTOCOLS = {
    "openai": [
        "openai-models",
        "openai-embeddings",
        "openai-moderations",
        "openai-completions",
        "openai-chat",
    ],
    "anthropic": ["anthropic-models", "anthropic-count-tokens", "anthropic"],
    "gemini": ["gemini-batch-embed-contents", "gemini-count-tokens", "gemini"],
}


def flow_for(folder: Path, provider: str, question: str = QUESTION, stream: bool = False) -> Path:
    command = f"{shlex.quote(sys.executable)} {AGENTS / 'py_endpoints.py'} {provider}"
    return write_flow(
        folder,
        name=f"rag-{provider}",
        command=command,
        tools=[],
        env={"ENDPOINT_STREAM": "1" if stream else "0"},
        steps=[{"prompt": question}, {"assert": f"reply contains {question}"}],
    )


def record(spec: Path) -> FakeUpstream:
    return recorded_on_fake(spec, "sk-endpoint")


@pytest.mark.parametrize("provider", sorted(PROTOCOLS))
def test_endpoints_record_and_replay_offline_twice(tmp_path: Path, provider: str) -> None:
    spec = flow_for(tmp_path, provider)
    fake = record(spec)
    trace = traces.load(trace_path(spec))
    assert [turn.protocol for turn in trace.turns] == PROTOCOLS[provider]
    assert "sk-endpoint" not in trace_path(spec).read_text()
    if provider == "gemini":  # the model came from the path, and stays matched
        assert trace.turns[0].request["model"] == "gemini-embedding-001"
    # The fake refused any request whose key was not in its provider's header: all answered.
    assert len(fake.requests) == len(PROTOCOLS[provider])

    lines = timeline(trace, "t")
    assert sum("(endpoint)" in line for line in lines) == len(PROTOCOLS[provider]) - 1
    for _ in range(2):  # the fake is stopped: replay must need nothing
        result = run_cli("run", spec)
        assert result.code == 0, result.output
        assert result.stdout.startswith(f"PASS: rag-{provider} flow")


def test_a_plain_legacy_completion_serves_the_streaming_client(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, "openai")
    record(spec)
    replays_with_env(spec, ENDPOINT_STREAM="1")


@pytest.mark.parametrize(
    ("provider", "first_change"),
    [
        ("openai", "the openai-embeddings `input` content changed"),
        ("anthropic", "turn 2: message 0 (user) content changed"),
        ("gemini", "the gemini-batch-embed-contents `requests` content changed"),
    ],
)
def test_a_changed_question_fails_naming_the_endpoint(
    tmp_path: Path, provider: str, first_change: str
) -> None:
    spec = flow_for(tmp_path, provider)
    record(spec)
    flow_for(tmp_path, provider, question="What is the cancellation policy?")
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert first_change in result.stdout, result.output
    assert "cancellation" in result.stdout


def test_an_endpoint_flowproof_does_not_speak_fails_the_flow_naming_it(tmp_path: Path) -> None:
    script = (
        "import os, openai\n"
        "client = openai.OpenAI(max_retries=0)\n"
        "try:\n"
        "    client.audio.speech.create(model='tts-1', voice='alloy', input='hi')\n"
        "except openai.NotFoundError as exc:\n"
        "    print('refused:', exc.body['message'])\n"
        "print(client.chat.completions.create(model='m', messages=["
        "{'role': 'user', 'content': os.environ['FLOWPROOF_PROMPT']}]).choices[0].message.content)"
    )
    spec = write_flow(
        tmp_path,
        name="speech",
        command=f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}",
        tools=[],
        steps=[{"prompt": QUESTION}, {"assert": "reply contains You said"}],
    )
    fake, result = record_on_fake(spec, "sk-x")
    assert result.code == 1, result.output
    said = "POST /v1/audio/speech is not a model endpoint flowproof records"
    assert said in result.stdout, result.output
    assert result.stdout.startswith(f"FAIL: speech flow - flowproof: {said} (it records ")
    assert not trace_path(spec).exists()  # never a silent pass, never a trace
    assert all("audio" not in request.path for request in fake.requests)
