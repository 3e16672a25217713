"""The Bedrock turn of the benchmarks: a Converse request, its recorded answer (about 2 KB of
text), the trace that replays it and the stream a real server would send for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.payloads import REPLY, write_trace
from flowproof_cli.dialects.bedrock import BedrockConverse

MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
PATH = "/model/us.anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
TEXT = (REPLY + " ") * max(1, 2_000 // (len(REPLY) + 1))


def converse_request() -> dict[str, Any]:
    """The request body boto3 sends (the model travels in the path)."""
    return {
        "messages": [{"role": "user", "content": [{"text": "What's the weather in Nairobi?"}]}],
        "system": [{"text": "You are a weather assistant."}],
        "inferenceConfig": {"maxTokens": 512},
    }


def converse_answer() -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": TEXT}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 20, "outputTokens": 500, "totalTokens": 520},
        "metrics": {"latencyMs": 400},
    }


def stream_bytes() -> bytes:
    """The event stream flowproof serves for the recorded answer (the stub serves it too)."""
    dialect = BedrockConverse()
    request = dialect.normalize(PATH, converse_request())
    return dialect.render(request, 200, converse_answer(), stream=True).body


def trace(path: Path, copies: int) -> Path:
    """The turn `copies` times (a recorded turn replays once), as record writes it."""
    request = BedrockConverse().canonical_request(
        BedrockConverse().normalize(PATH, converse_request())
    )
    entry = {
        "protocol": "bedrock-converse",
        "request": request,
        "response": {"status": 200, "body": converse_answer()},
    }
    return write_trace(path, [entry] * copies)
