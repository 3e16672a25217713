"""Amazon Bedrock through the real boto3 client: record against a fake Bedrock runtime that
checks every request's SigV4 signature, stop it, replay offline twice; streamed and not,
Converse and InvokeModel (Anthropic bodies), a retrieval agent's embeddings; then the red
paths (a changed toolConfig, no AWS credentials)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli import trace as traces
from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, write_flow
from tests.fakes.bedrock_upstream import ACCESS_KEY, API_KEY, REGION, SECRET_KEY, BedrockFake
from tests.fakes.fake_upstream import Reply

pytestmark = pytest.mark.slow

pytest.importorskip("boto3")

MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
ENCODED_MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1%3A0"
OPERATIONS = ["converse", "converse_stream", "invoke", "invoke_stream"]
#: Nothing for the agent: flowproof injects AWS_ENDPOINT_URL_BEDROCK_RUNTIME, placeholder
#: credentials and a region (providers/bedrock.py), never its own credentials.
AGENT_ENV: dict[str, str] = {}
#: flowproof's own credentials, used only to re-sign what record forwards.
RECORD_ENV = {
    "AWS_ACCESS_KEY_ID": ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_REGION": REGION,
}


def flow_for(folder: Path, operation: str, **env: str) -> Path:
    steps = [
        {"prompt": "What's the weather in Nairobi right now? Use both tools."},
        {"assert_tool_call": "get_weather where city equals Nairobi"},
        {"assert_tool_call": "get_time"},
        {"assert": "reply contains sunny"},
    ]
    return write_flow(
        folder,
        command=f"{sys.executable} {AGENTS / 'py_bedrock.py'}",
        env={**AGENT_ENV, "BEDROCK_OPERATION": operation, **env},
        steps=steps,
    )


def trace_path(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml"))


def record(
    spec: Path,
    *,
    credentials: dict[str, str] = RECORD_ENV,
    upstreams: tuple[str, ...] = ("FLOWPROOF_AGENT_UPSTREAM",),
    **extra: str,
) -> tuple[BedrockFake, Any]:
    """Record `spec` against a fresh fake Bedrock, named by each of `upstreams`, with
    flowproof's `credentials` (`extra`: more of its environment); the stopped fake and the
    result."""
    with BedrockFake() as fake:
        upstream = dict.fromkeys(upstreams, fake.base_url)
        result = run_cli("record", spec, env={**upstream, **credentials, **extra})
    return fake, result


def set_agent_env(spec: Path, **variables: str) -> None:
    data = yaml.safe_load(spec.read_text())
    data["agent"]["env"].update(variables)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize("operation", OPERATIONS)
def test_boto3_records_and_replays_offline(tmp_path: Path, operation: str) -> None:
    spec = flow_for(tmp_path, operation)
    fake, result = record(spec)
    assert result.code == 0, result.output

    upstream = fake.requests
    assert len(upstream) == 2  # signed right the first time: the fake refuses anything else
    plain = "converse" if operation.startswith("converse") else "invoke"
    for request in upstream:  # record forwards the plain operation, re-signed
        assert request.path == f"/model/{ENCODED_MODEL}/{plain}"
        assert f"Credential={ACCESS_KEY}/" in request.headers["authorization"]
        assert "FLOWPROOFPLACEHOLDER" not in str(request.headers)
        assert "modelId" not in request.body and "stream" not in request.body

    trace = traces.load(trace_path(spec))
    protocol = "bedrock-converse" if plain == "converse" else "bedrock-invoke"
    assert [turn.protocol for turn in trace.turns] == [protocol, protocol]
    assert all(turn.request["modelId"] == MODEL for turn in trace.turns)
    text = trace_path(spec).read_text()
    assert SECRET_KEY not in text and ACCESS_KEY not in text
    assert SECRET_KEY not in result.output

    for _ in range(2):  # the fake is stopped: replay must need nothing
        result = run_cli("run", spec)
        assert result.code == 0, result.output
        assert result.stdout.startswith("PASS: weather flow")


NODE_SDK = Path(__file__).resolve().parents[1] / "node_modules" / "@aws-sdk"


@pytest.mark.skipif(
    not (NODE_SDK / "client-bedrock-runtime").is_dir() or shutil.which("node") is None,
    reason="tests/node_modules has no @aws-sdk/client-bedrock-runtime: npm ci in tests/",
)
@pytest.mark.parametrize("operation", ["converse", "converse_stream"])
def test_the_aws_sdk_for_javascript_records_and_replays(tmp_path: Path, operation: str) -> None:
    spec = write_flow(
        tmp_path,
        command=f"node {AGENTS / 'node_bedrock_converse.mjs'}",
        env={"BEDROCK_OPERATION": operation},
        steps=[
            {"prompt": "What's the weather in Nairobi right now? Use both tools."},
            {"assert_tool_call": "get_weather where city equals Nairobi"},
            {"assert": "reply contains sunny"},
        ],
    )
    fake, result = record(spec)
    assert result.code == 0, result.output
    assert [r.path for r in fake.requests] == [f"/model/{ENCODED_MODEL}/converse"] * 2
    for _ in range(2):
        result = run_cli("run", spec)
        assert result.code == 0, result.output
    set_agent_env(spec, BEDROCK_TOOL_CHOICE="any")
    result = run_cli("run", spec)
    assert result.code == 1 and "toolConfig" in result.output, result.output


def test_a_bedrock_api_key_records_without_aws_credentials(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, "converse_stream")
    fake, result = record(spec, credentials={"FLOWPROOF_AGENT_KEY": API_KEY})
    assert result.code == 0, result.output
    assert [r.headers["authorization"] for r in fake.requests] == [f"Bearer {API_KEY}"] * 2
    assert API_KEY not in trace_path(spec).read_text()
    result = run_cli("run", spec)
    assert result.code == 0, result.output


def test_a_plain_recording_serves_the_streaming_client(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, "converse")
    _, result = record(spec)
    assert result.code == 0, result.output
    set_agent_env(spec, BEDROCK_OPERATION="converse_stream")
    result = run_cli("run", spec)
    assert result.code == 0, result.output


@pytest.mark.parametrize("kind", ["titan", "cohere"])
def test_a_retrieval_agents_embeddings_record_and_replay(tmp_path: Path, kind: str) -> None:
    spec = flow_for(tmp_path, "converse", BEDROCK_EMBED=kind)
    fake, result = record(spec)
    assert result.code == 0, result.output
    trace = traces.load(trace_path(spec))
    embeddings = [turn for turn in trace.turns if "messages" not in turn.request]
    assert embeddings and all(turn.protocol == "bedrock-invoke" for turn in embeddings)
    assert len(fake.requests) == len(trace.turns)
    result = run_cli("run", spec)
    assert result.code == 0, result.output

    # A changed embedding input fails, naming the change (the trace's copy edited: the
    # agent still embeds the original text)
    edited = trace_path(spec).read_text().replace("Lima is the capital", "Quito is the capital")
    trace_path(spec).write_text(edited)
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert "Lima" in result.output or "Quito" in result.output, result.output


# -- red paths -------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["converse", "converse_stream"])
def test_a_changed_tool_config_diverges_naming_it(tmp_path: Path, operation: str) -> None:
    spec = flow_for(tmp_path, operation)
    _, result = record(spec)
    assert result.code == 0, result.output
    set_agent_env(spec, BEDROCK_TOOL_CHOICE="any")  # the agent's code changed its toolChoice
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert "divergence" in result.output and "toolConfig" in result.output, result.output


def test_record_without_aws_credentials_fails_naming_the_variables(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, "converse")
    upstreams = ("FLOWPROOF_AGENT_UPSTREAM", "FLOWPROOF_UPSTREAM_BEDROCK")
    fake, result = record(spec, credentials={}, upstreams=upstreams)
    assert result.code == 2, result.output
    assert "AWS_ACCESS_KEY_ID" in result.output and "AWS_SECRET_ACCESS_KEY" in result.output
    assert "AWS_REGION" in result.output
    assert not fake.requests


def test_a_bedrock_call_with_no_credentials_fails_the_record(tmp_path: Path) -> None:
    """No FLOWPROOF_UPSTREAM_BEDROCK, so record could not know before the run: the first
    Bedrock call is refused and the record fails naming the variables, nothing written."""
    spec = flow_for(tmp_path, "converse")
    fake, result = record(spec, credentials={})
    assert result.code == 1, result.output
    assert "AWS_ACCESS_KEY_ID" in result.output and "AWS_SECRET_ACCESS_KEY" in result.output
    assert not fake.requests
    assert not trace_path(spec).exists()


def test_a_wrong_secret_is_refused_upstream_and_fails_the_record(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, "converse")
    fake, result = record(spec, AWS_SECRET_ACCESS_KEY="not-the-secret-of-the-fake-0000")
    assert result.code == 1, result.output
    assert "InvalidSignatureException" in result.output or "signature" in result.output
    assert fake.requests  # it reached the upstream, which refused the signature
    assert not trace_path(spec).exists()


def test_an_upstream_error_reaches_the_agent_in_bedrocks_shape(tmp_path: Path) -> None:
    seen = tmp_path / "agent-error.txt"
    spec = flow_for(tmp_path, "converse", AGENT_ERROR_FILE=str(seen))
    refused = Reply(status=400, error_body={"message": "The model returned a bad request"})
    with BedrockFake(script=lambda operation, body: refused) as fake:
        result = run_cli(
            "record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": fake.base_url, **RECORD_ENV}
        )
    assert result.code == 1, result.output
    assert "The model returned a bad request" in result.output
    # boto3 read the error code from the x-amzn-ErrorType header flowproof passed on
    assert seen.read_text() == (
        "An error occurred (ValidationException) when calling the Converse operation: "
        "The model returned a bad request"
    )
    assert not trace_path(spec).exists()
