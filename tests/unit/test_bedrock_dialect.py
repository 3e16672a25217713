"""The Amazon Bedrock dialects (Converse / ConverseStream, InvokeModel / InvokeModelWithResponse-
Stream): path folding, mocks, trajectory, outline, event-stream frames read back by the real
botocore client, upstream URL and body, SigV4 re-signing checked by the fake's own verifier,
and the errors."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.exceptions
import pytest
from botocore.awsrequest import AWSResponse

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Upstream
from flowproof_cli.dialects import dialect_named, eventstream, route
from flowproof_cli.dialects.bedrock import BedrockConverse
from flowproof_cli.dialects.bedrock_invoke import BedrockInvoke
from flowproof_cli.errors import ConfigError
from flowproof_cli.providers.aws_signing import AwsSigner, BedrockSigning, signer_from_environment
from tests.fakes.bedrock_upstream import ACCESS_KEY, REGION, SECRET_KEY, auth_problem
from tests.fakes.fake_upstream import Headers

CONVERSE = BedrockConverse()
INVOKE = BedrockInvoke()
MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
ENCODED = "us.anthropic.claude-3-5-haiku-20241022-v1%3A0"
SYSTEM = "You are a weather assistant."
LONG = "The weather in Nairobi is sunny with a light breeze and 24 degrees, all afternoon."
TOOL_CONFIG: dict[str, Any] = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "description": "Current weather.",
                "inputSchema": {"json": {"type": "object", "properties": {"city": {}}}},
            }
        },
        {"toolSpec": {"name": "get_time", "inputSchema": {"json": {"type": "object"}}}},
    ],
    "toolChoice": {"auto": {}},
}
CALLS_ANSWER: dict[str, Any] = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [
                {"text": "Let me look."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "get_weather",
                        "input": {"city": "Nairobi", "days": [1, 2]},
                    }
                },
                {"toolUse": {"toolUseId": "tooluse_2", "name": "get_time", "input": {}}},
            ],
        }
    },
    "stopReason": "tool_use",
    "usage": {"inputTokens": 10, "outputTokens": 20, "totalTokens": 30},
    "metrics": {"latencyMs": 321},
}
TEXT_ANSWER: dict[str, Any] = {
    "output": {"message": {"role": "assistant", "content": [{"text": LONG}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 10, "outputTokens": 20, "totalTokens": 30},
    "metrics": {"latencyMs": 100},
}


def converse_request(**extra: Any) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": [{"text": "Weather in Nairobi?"}]}],
        "system": [{"text": SYSTEM}],
        "toolConfig": TOOL_CONFIG,
        **extra,
    }


# -- boto3 reading what flowproof serves -------------------------------------------------------


class _Raw:
    """The raw body botocore reads a response from (`stream()` for an event stream)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        for at in range(0, len(self.data), 7):  # in small pieces, as a socket delivers
            yield self.data[at : at + 7]

    def read(self, *_: Any) -> bytes:
        data, self.data = self.data, b""
        return data


def boto3_client(status: int, content_type: str, body: bytes) -> Any:
    """A real bedrock-runtime client whose HTTP answer is `body` (nothing is sent)."""
    client = boto3.client(
        "bedrock-runtime",
        region_name=REGION,
        aws_access_key_id="placeholder",
        aws_secret_access_key="placeholder",
        endpoint_url="http://127.0.0.1:9",
        config=botocore.config.Config(retries={"max_attempts": 1}),
    )

    def answer(request: Any, **_: Any) -> AWSResponse:
        headers = {"content-type": content_type}
        return AWSResponse(request.url, status, headers, _Raw(body))  # type: ignore[arg-type]

    client.meta.events.register("before-send.bedrock-runtime.*", answer)
    return client


# -- routing and the path ----------------------------------------------------------------------


def test_the_four_operations_route_to_the_two_dialects() -> None:
    assert route(f"/model/{ENCODED}/converse") is dialect_named("bedrock-converse")
    assert route(f"/model/{ENCODED}/converse-stream") is dialect_named("bedrock-converse")
    assert route(f"/model/{ENCODED}/invoke") is dialect_named("bedrock-invoke")
    assert route(f"/model/{ENCODED}/invoke-with-response-stream") is dialect_named("bedrock-invoke")
    assert CONVERSE.provider == INVOKE.provider == "bedrock"


def test_the_model_is_folded_in_decoded_and_the_stream_is_transport() -> None:
    plain = CONVERSE.normalize(f"/model/{ENCODED}/converse", converse_request())
    streamed = CONVERSE.normalize(f"/model/{ENCODED}/converse-stream", converse_request())
    assert plain["modelId"] == streamed["modelId"] == MODEL
    assert not CONVERSE.wants_stream(plain) and CONVERSE.wants_stream(streamed)
    assert CONVERSE.canonical_request(streamed) == CONVERSE.canonical_request(plain)
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.x"
    from urllib.parse import quote

    folded = INVOKE.normalize(f"/model/{quote(arn, safe='')}/invoke", {"inputText": "hi"})
    assert folded["modelId"] == arn


def test_record_forwards_the_plain_operation_without_model_or_stream() -> None:
    base = "https://bedrock-runtime.us-east-1.amazonaws.com"
    for dialect, path, plain in (
        (CONVERSE, f"/model/{ENCODED}/converse-stream", "converse"),
        (INVOKE, f"/model/{ENCODED}/invoke-with-response-stream", "invoke"),
    ):
        assert dialect.upstream_url_for_path(base + "/", path) == f"{base}/model/{ENCODED}/{plain}"
        body = dialect.normalize(path, {"messages": [], "anthropic_version": "bedrock-2023-05-31"})
        assert dialect.upstream_body(body) == {
            "messages": [],
            "anthropic_version": "bedrock-2023-05-31",
        }
        # A Bedrock API key as a bearer token (used only without AWS credentials)
        assert dialect.upstream_auth("sk-anything") == {"authorization": "Bearer sk-anything"}
    assert INVOKE.upstream_default_headers() == {}  # no anthropic-version header on Bedrock


# -- mocks, trajectory, outline ----------------------------------------------------------------


def test_a_mocked_tool_result_is_answered_by_the_mock() -> None:
    history = converse_request()["messages"] + [
        CALLS_ANSWER["output"]["message"],
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_1",
                        "content": [{"json": {"forecast": "real"}}],
                        "status": "success",
                    }
                },
                {"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "09:13"}]}},
            ],
        },
    ]
    mocked = CONVERSE.apply_mocks({"messages": history}, {"get_time": '{"now":"T"}'}, {})
    results = [block["toolResult"] for block in mocked["messages"][-1]["content"]]
    assert results[0]["content"] == [{"json": {"forecast": "real"}}]  # not mocked: untouched
    assert results[1] == {"toolUseId": "tooluse_2", "content": [{"text": '{"now":"T"}'}]}


def test_the_trajectory_reads_tool_uses_and_text() -> None:
    turn = CONVERSE.assistant_turn(converse_request(), CALLS_ANSWER, 1)
    assert turn.text == "Let me look."
    assert [(c.name, c.arguments, c.call_id) for c in turn.tool_calls] == [
        ("get_weather", {"city": "Nairobi", "days": [1, 2]}, "tooluse_1"),
        ("get_time", {}, "tooluse_2"),
    ]
    assert turn.thread_key == SYSTEM
    assert CONVERSE.call_names(CALLS_ANSWER) == {
        "tooluse_1": "get_weather",
        "tooluse_2": "get_time",
    }


def test_the_outline_names_model_tools_and_the_tool_choice_apart() -> None:
    outline = CONVERSE.outline(CONVERSE.normalize(f"/model/{ENCODED}/converse", converse_request()))
    assert outline.model == MODEL
    assert list(outline.tools) == ["get_weather", "get_time"]
    assert outline.parameters == {"toolConfig": {"toolChoice": {"auto": {}}}}
    assert [m.role for m in outline.messages] == ["system", "user"]


def test_a_changed_tool_choice_diverges_naming_tool_config() -> None:
    from flowproof_cli.cassette import Turn

    recorded = CONVERSE.normalize(f"/model/{ENCODED}/converse", converse_request())
    session = CassetteSession(
        Mode.REPLAY, recorded=[Turn("bedrock-converse", recorded, 200, TEXT_ANSWER)]
    )
    changed = converse_request(toolConfig={**TOOL_CONFIG, "toolChoice": {"any": {}}})
    answer = session.on_request(
        f"/model/{ENCODED}/converse", json.dumps(changed).encode(), CONVERSE
    )
    assert not isinstance(answer, Forward) and answer.status == 409
    assert session.divergence is not None
    assert "toolConfig" in session.divergence.message, session.divergence.message
    client = boto3_client(answer.status, answer.content_type, answer.body)
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        client.converse(modelId=MODEL, messages=changed["messages"])
    assert raised.value.response["Error"]["Code"] == "flowproof_divergence"
    assert "toolConfig" in raised.value.response["Error"]["Message"]


# -- rendering, read back by boto3 -------------------------------------------------------------


@pytest.mark.parametrize("answer", [CALLS_ANSWER, TEXT_ANSWER], ids=["calls", "text"])
def test_converse_stream_frames_read_back_by_boto3(answer: dict[str, Any]) -> None:
    request = CONVERSE.normalize(f"/model/{ENCODED}/converse-stream", converse_request())
    rendered = CONVERSE.render(request, 200, answer, stream=True)
    assert rendered.content_type == "application/vnd.amazon.eventstream"
    events = list(
        boto3_client(200, rendered.content_type, rendered.body)
        .converse_stream(modelId=MODEL, messages=[])
        .get("stream")
    )
    kinds = [next(iter(event)) for event in events]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]
    assert events[-2]["messageStop"]["stopReason"] == answer["stopReason"]
    assert events[-1]["metadata"]["usage"] == answer["usage"]
    assert sum(kind == "contentBlockDelta" for kind in kinds) > len(
        answer["output"]["message"]["content"]
    )  # text and inputs arrive in pieces
    rebuilt, count = CONVERSE.reassemble(rendered.body)
    assert count == len(events)
    assert rebuilt["output"] == answer["output"]


def test_converse_plain_answer_reads_back_by_boto3() -> None:
    rendered = CONVERSE.render({}, 200, CALLS_ANSWER, stream=False)
    got = boto3_client(200, rendered.content_type, rendered.body).converse(
        modelId=MODEL, messages=[]
    )
    assert got["output"] == CALLS_ANSWER["output"] and got["stopReason"] == "tool_use"


ANTHROPIC_ANSWER: dict[str, Any] = {
    "id": "msg_bdrk_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-3-5-haiku-20241022",
    "content": [
        {"type": "text", "text": LONG},
        {"type": "tool_use", "id": "toolu_bdrk_1", "name": "get_weather", "input": {"city": "X"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 7},
}
MESSAGES_BODY = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}


def test_invoke_stream_chunks_read_back_by_boto3() -> None:
    path = f"/model/{ENCODED}/invoke-with-response-stream"
    request = INVOKE.normalize(path, MESSAGES_BODY)
    rendered = INVOKE.render(request, 200, ANTHROPIC_ANSWER, stream=True)
    client = boto3_client(200, rendered.content_type, rendered.body)
    body = client.invoke_model_with_response_stream(modelId=MODEL, body=b"{}")["body"]
    chunks = [json.loads(event["chunk"]["bytes"]) for event in body]
    assert chunks[0]["type"] == "message_start" and chunks[-1]["type"] == "message_stop"
    assert chunks[-1]["amazon-bedrock-invocationMetrics"]["outputTokenCount"] == 7
    assert "ping" not in [chunk["type"] for chunk in chunks]
    rebuilt, _ = INVOKE.reassemble(rendered.body)
    assert rebuilt["content"] == ANTHROPIC_ANSWER["content"]
    turn = INVOKE.assistant_turn(request, ANTHROPIC_ANSWER, 1)
    assert turn.text == LONG and [c.name for c in turn.tool_calls] == ["get_weather"]


def test_an_embedding_invoke_is_neither_text_nor_a_call() -> None:
    request = INVOKE.normalize("/model/amazon.titan-embed-text-v2%3A0/invoke", {"inputText": "q"})
    answer = {"embedding": [0.1, 0.2], "inputTextTokenCount": 1}
    turn = INVOKE.assistant_turn(request, answer, 1)
    assert turn.text is None and turn.tool_calls == ()
    rendered = INVOKE.render(request, 200, answer, stream=False)
    got = boto3_client(200, rendered.content_type, rendered.body).invoke_model(
        modelId="amazon.titan-embed-text-v2:0", body=b"{}"
    )
    assert json.loads(got["body"].read()) == answer


def test_an_error_is_bedrocks_shape() -> None:
    for dialect in (CONVERSE, INVOKE):
        assert dialect.error_body("no", "flowproof_divergence", 409) == {
            "message": "no",
            "__type": "flowproof_divergence",
        }


# -- event-stream frames -----------------------------------------------------------------------


def test_a_damaged_frame_is_refused_not_misread() -> None:
    data = bytearray(eventstream.event("messageStart", {"role": "assistant"}))
    assert [frame.json() for frame in eventstream.frames(bytes(data))] == [{"role": "assistant"}]
    data[-6] ^= 1  # one bit of the payload
    with pytest.raises(eventstream.FrameError, match="message CRC"):
        list(eventstream.frames(bytes(data)))
    with pytest.raises(eventstream.FrameError, match="trailing"):
        list(eventstream.frames(eventstream.event("x", {}) + b"\x00\x01"))


# -- signing -----------------------------------------------------------------------------------

FAKE_SIGNER = AwsSigner(ACCESS_KEY, SECRET_KEY, None, REGION)
#: What record's session holds for Bedrock (the provider registry's signer) with them.
FAKE_SIGNERS = {"bedrock": BedrockSigning(FAKE_SIGNER)}


def signed_headers(signer: AwsSigner | None, url: str, body: bytes) -> dict[str, str] | str:
    return BedrockSigning(signer).headers_for(url, body, {}, CONVERSE.name)


def _arrived(url: str, body: bytes, headers: dict[str, str]) -> Headers:
    from urllib.parse import urlsplit

    return Headers([*headers.items(), ("host", urlsplit(url).netloc)])


def test_the_forwarded_request_is_signed_as_bedrock_checks_it() -> None:
    url = f"http://127.0.0.1:8123/model/{ENCODED}/converse"
    body = json.dumps(converse_request()).encode()
    headers = signed_headers(FAKE_SIGNER, url, body)
    assert isinstance(headers, dict)
    assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert headers["accept"] == headers["content-type"] == "application/json"
    path = url.split("8123", 1)[1]
    assert auth_problem("POST", path, _arrived(url, body, headers), body) is None
    # The fake's verifier can fail: another body, another secret, no signature at all
    other = auth_problem("POST", path, _arrived(url, body, headers), body + b" ")
    assert other is not None and other.startswith("InvalidSignatureException")
    wrong = AwsSigner(ACCESS_KEY, "not-the-secret", None, REGION)
    resigned = signed_headers(wrong, url, body)
    assert isinstance(resigned, dict)
    assert auth_problem("POST", path, _arrived(url, body, resigned), body) is not None
    unsigned = {"content-type": "application/json"}
    assert "Missing" in str(auth_problem("POST", path, _arrived(url, body, unsigned), body))


def test_a_session_token_travels_signed() -> None:
    signer = AwsSigner(ACCESS_KEY, SECRET_KEY, "session-token-0123456789", REGION)
    headers = signer.signed_headers("https://bedrock-runtime.us-east-1.amazonaws.com/x", b"{}", {})
    assert headers["x-amz-security-token"] == "session-token-0123456789"
    assert "x-amz-security-token" in headers["authorization"]


def test_the_signer_never_shows_its_credentials() -> None:
    signer = AwsSigner("AKIAVISIBLE000000000", "very-secret-value-0000", "token-0000000000", "r")
    assert "very-secret" not in repr(signer) and "AKIAVISIBLE" not in repr(signer)
    assert "token-0000" not in repr(signer)


def test_the_region_comes_from_the_environment_else_the_host() -> None:
    unset = AwsSigner(ACCESS_KEY, SECRET_KEY)
    assert unset.region_for("https://bedrock-runtime.eu-west-3.amazonaws.com") == "eu-west-3"
    with pytest.raises(ConfigError, match="AWS_REGION"):
        unset.region_for("http://127.0.0.1:9")
    missing = signed_headers(unset, "http://127.0.0.1:9/model/m/converse", b"{}")
    assert isinstance(missing, str) and "AWS_REGION" in missing


def test_credentials_come_from_flowprofs_own_environment() -> None:
    assert signer_from_environment({}) is None
    signer = signer_from_environment(
        {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_SESSION_TOKEN": "t" * 20,
            "AWS_DEFAULT_REGION": "eu-west-1",
        }
    )
    assert signer == AwsSigner(ACCESS_KEY, SECRET_KEY, "t" * 20, "eu-west-1")
    with pytest.raises(ConfigError, match="AWS_SECRET_ACCESS_KEY is not"):
        signer_from_environment({"AWS_ACCESS_KEY_ID": ACCESS_KEY})


def test_a_bedrock_upstream_without_credentials_is_an_error_before_the_run() -> None:
    with pytest.raises(ConfigError) as raised:
        signer_from_environment({"FLOWPROOF_UPSTREAM_BEDROCK": "https://bedrock.example"})
    message = str(raised.value)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        assert name in message


def test_a_bedrock_call_without_credentials_fails_the_record_in_bedrocks_shape() -> None:
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9"))
    answer = session.on_request(
        f"/model/{ENCODED}/converse", json.dumps(converse_request()).encode(), CONVERSE
    )
    assert not isinstance(answer, Forward)
    assert answer.status == 502
    body = json.loads(answer.body)
    assert body["__type"] == "flowproof_no_credentials"
    assert "AWS_ACCESS_KEY_ID" in body["message"] and "AWS_SECRET_ACCESS_KEY" in body["message"]
    assert session.errors and "the agent called Bedrock" in session.errors[0]


def test_a_signed_forward_carries_the_signature_and_no_key() -> None:
    session = CassetteSession(
        Mode.RECORD, upstream=Upstream("http://127.0.0.1:9", key="sk-default"), signers=FAKE_SIGNERS
    )
    forward = session.on_request(
        f"/model/{ENCODED}/invoke-with-response-stream",
        json.dumps(MESSAGES_BODY).encode(),
        INVOKE,
    )
    assert isinstance(forward, Forward)
    assert forward.url == f"http://127.0.0.1:9/model/{ENCODED}/invoke"
    assert forward.headers["authorization"].startswith("AWS4-HMAC-SHA256")
    assert "sk-default" not in json.dumps(forward.headers)
    assert json.loads(forward.body) == MESSAGES_BODY
    # What record keeps, and serves to the streaming client
    rendered = session.on_upstream_response(
        forward.pending, 200, json.dumps(ANTHROPIC_ANSWER).encode()
    )
    assert rendered.content_type == "application/vnd.amazon.eventstream"
    chunks = [
        json.loads(base64.b64decode(f.json()["bytes"])) for f in eventstream.frames(rendered.body)
    ]
    assert chunks[0]["type"] == "message_start"
    assert session.recorded[0].request["modelId"] == MODEL


def test_without_aws_credentials_a_bedrock_api_key_travels_as_a_bearer() -> None:
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9", key="bk-1"))
    forward = session.on_request(
        f"/model/{ENCODED}/converse-stream", json.dumps(converse_request()).encode(), CONVERSE
    )
    assert isinstance(forward, Forward)
    assert forward.headers == {
        "authorization": "Bearer bk-1",
        "content-type": "application/json",
        "accept": "application/json",  # the plain answer, whatever the streaming client asked
    }


def test_aws_credentials_win_over_a_key() -> None:
    session = CassetteSession(
        Mode.RECORD, upstream=Upstream("http://127.0.0.1:9", key="bk-1"), signers=FAKE_SIGNERS
    )
    forward = session.on_request(
        f"/model/{ENCODED}/converse", json.dumps(converse_request()).encode(), CONVERSE
    )
    assert isinstance(forward, Forward)
    assert forward.headers["authorization"].startswith("AWS4-HMAC-SHA256")
    assert "bk-1" not in json.dumps(forward.headers)


def test_a_bedrock_upstream_with_an_api_key_needs_no_aws_credentials() -> None:
    environ = {"FLOWPROOF_UPSTREAM_BEDROCK": "https://b.example", "FLOWPROOF_KEY_BEDROCK": "k"}
    assert signer_from_environment(environ) is None


def test_an_embedding_invoke_is_listed_beside_the_conversation_never_the_reply() -> None:
    from flowproof_cli.cassette import Turn
    from flowproof_cli.evidence.trace_view import trajectory_of, turn_views
    from flowproof_cli.trace import Trace

    embedding = Turn(
        "bedrock-invoke",
        {"modelId": "amazon.titan-embed-text-v2:0", "inputText": "weather in Nairobi?"},
        200,
        {"embedding": [0.1, 0.2, 0.3], "inputTextTokenCount": 4},
    )
    chat = Turn("bedrock-converse", {**converse_request(), "modelId": MODEL}, 200, TEXT_ANSWER)
    # more embedding calls than chat turns: they must not become the main thread
    views = turn_views(Trace(flow="x", turns=[embedding, embedding, chat]), "x")
    assert views[0].is_endpoint and views[0].endpoint is not None
    assert views[0].endpoint.asked == "input: weather in Nairobi?"
    assert views[0].endpoint.answered == "1 vector of 3"
    trajectory = trajectory_of(views)
    assert len(trajectory.endpoint_calls) == 2
    assert [turn.text for turn in trajectory.main_thread] == [LONG]


def test_the_conversation_view_shows_an_embedding_invoke_as_its_vectors() -> None:
    """Not as a chat with "(an empty answer)": the view reads the answer as the trajectory
    does."""
    from flowproof_addons.conversation import model_response

    request = {"modelId": "amazon.titan-embed-text-v2:0", "inputText": "weather in Nairobi?"}
    answer = json.dumps({"embedding": [0.1, 0.2, 0.3], "inputTextTokenCount": 4}).encode()
    lines = model_response(dialect_named("bedrock-invoke"), request, answer, 200, None)
    assert lines == ["bedrock-invoke response, status 200", "", "1 vector of 3"]
