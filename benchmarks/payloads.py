"""The bytes every contender serves: requests of a given size, one recorded response.

Requests and the recorded response are generated, not captured, so every contender
answers the very same turn. The trace is built with flowproof's own dialect code (the
canonical request is what `flowproof record` would store), the bare stub and aimock
get the same response as a body / a fixture.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import yaml

from flowproof_cli.dialects import route

MODEL = "gpt-4o-mini"
PATH = "/v1/chat/completions"
REPLY = (
    "The forecast for Nairobi is sunny with a light breeze, 24 degrees in the afternoon "
    "and 14 at night; no rain is expected before the weekend."
)
_FILLER = "The quick brown fox jumps over the lazy dog while the weather holds. "


def marker(index: int) -> str:
    """A unique tag per distinct request (aimock matches on it; the index hashes it)."""
    return f"[bench-turn-{index:06d}]"


def request_body(size: int, index: int = 0) -> dict[str, Any]:
    """A chat request of about `size` bytes of JSON: a system prompt, then the user turn."""
    filler = (_FILLER * (size // len(_FILLER) + 1))[: max(size - 200, 16)]
    return {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": filler},
            {"role": "user", "content": f"{marker(index)} What's the weather in Nairobi?"},
        ],
    }


def completion(content: str | None = REPLY, calls: list[dict[str, Any]] | None = None) -> dict:
    """A chat.completion body as an upstream would answer it."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-bench0001",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 32, "total_tokens": 152},
    }


_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _NoAliasDumper(_Dumper):  # type: ignore[misc,valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        return True


def canonical(body: dict[str, Any]) -> dict[str, Any]:
    """The request as flowproof stores it (its own dialect's canonical form)."""
    dialect = route(PATH)
    assert dialect is not None
    return dialect.canonical_request(dialect.apply_mocks(dialect.normalize(PATH, body), {}, {}))


def sse(body: dict[str, Any], response: dict[str, Any]) -> str:
    """The stream flowproof synthesizes for this turn (the stub sends the same bytes)."""
    dialect = route(PATH)
    assert dialect is not None
    return dialect.stream_events(body, response)


def _entry(body: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    return {"request": canonical(body), "response": {"status": 200, "body": response}}


def write_trace(path: Path, entries: list[dict[str, Any]]) -> Path:
    """A trace document with every turn written out as `flowproof record` writes it (no
    YAML aliases), so the loader reads the file turn by turn as it does a recorded trace."""
    document = {"flowproof_trace": 1, "flow": "benchmark", "turns": entries}
    path.write_text(yaml.dump(document, Dumper=_NoAliasDumper, sort_keys=False, width=1 << 30))
    return path


def repeated_trace(path: Path, copies: dict[int, int]) -> Path:
    """One turn per size, each the number of times `copies` gives for its size (a recorded
    turn replays once), written out in full as a recording is: the trace loader refuses
    aliases that repeat this much data as a YAML alias bomb."""
    entries = [
        _entry(request_body(size), completion())
        for size, count in copies.items()
        for _ in range(count)
    ]
    return write_trace(path, entries)


def distinct_trace(path: Path, size: int, turns: int) -> Path:
    """`turns` different requests of `size` (index `i` carries marker `i`)."""
    response = completion()
    entries = [_entry(request_body(size, i), response) for i in range(turns)]
    return write_trace(path, entries)


def long_text(chars: int) -> str:
    """A reply of `chars` characters (prose, so it escapes as JSON the way answers do)."""
    return (_FILLER * (chars // len(_FILLER) + 1))[:chars]


def large_answer_trace(path: Path, chars: int) -> Path:
    """One 2 KB turn whose recorded answer is `chars` characters long."""
    return write_trace(path, [_entry(request_body(2_000), completion(long_text(chars)))])


def stub_responses(path: Path, responses: list[dict[str, Any]], size: int = 2000) -> Path:
    """The bare stub's canned answers: JSON and SSE per response, served in turn."""
    request = request_body(size)
    document = {
        "json": [json.dumps(r) for r in responses],
        "sse": [sse(request, r) for r in responses],
    }
    path.write_text(json.dumps(document))
    return path


def aimock_fixture(path: Path) -> Path:
    """The recorded reply as an aimock fixture, matched on the request's marker."""
    fixture = {"match": {"userMessage": marker(0)}, "response": {"content": REPLY}}
    path.write_text(json.dumps({"fixtures": [fixture]}))
    return path


#: The embedding request of the endpoint benchmark (the openai SDK adds base64 encoding).
EMBEDDING_REQUEST: dict[str, Any] = {
    "model": "text-embedding-3-small",
    "input": ["What is the refund policy for an order that arrived damaged?"],
}
EMBEDDING_DIMENSIONS = 1536


def embedding_response() -> dict[str, Any]:
    """One 1536-float vector as the API sends it for base64 encoding."""
    values = [((i * 7919) % 1000) / 1000 - 0.5 for i in range(EMBEDDING_DIMENSIONS)]
    packed = base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": packed}],
        "model": EMBEDDING_REQUEST["model"],
        "usage": {"prompt_tokens": 12, "total_tokens": 12},
    }


def embedding_trace(path: Path) -> Path:
    """One embeddings turn, as the SDK's request is recorded (base64 asked for)."""
    request = {**EMBEDDING_REQUEST, "encoding_format": "base64"}
    turn = {
        "protocol": "openai-embeddings",
        "request": request,
        "response": {"status": 200, "body": embedding_response()},
    }
    return write_trace(path, [turn])


def embedding_stub(path: Path) -> Path:
    """The bare stub's canned embedding answer (never streamed)."""
    answer = json.dumps(embedding_response())
    path.write_text(json.dumps({"json": [answer], "sse": [answer]}))
    return path
