"""The fake upstream's endpoints around chat (stdlib only), with each provider's auth checked.

OpenAI: ``POST .../embeddings`` (floats, or base64 float32 when asked), ``.../moderations``,
``.../completions`` (legacy), ``GET .../models``. Anthropic: ``POST .../messages/count_tokens``
and ``GET .../models`` (told from OpenAI's by ``anthropic-version`` / ``x-api-key``). Gemini:
``:embedContent``, ``:batchEmbedContents``, ``:countTokens`` and ``GET .../models`` (Google's
key header or ``key=``).

Every answer mints random values (vectors, ids), so a replay that passes proves flowproof
answered from the trace. Each provider's credential is checked where that provider reads it
(a Bearer token for OpenAI, ``x-api-key`` with ``anthropic-version`` for Anthropic,
``x-goog-api-key`` for Gemini), and refused in that provider's error shape otherwise, so a
passing record proves the key went into the right header.
"""

from __future__ import annotations

import base64
import random
import re
import struct
from collections.abc import Mapping
from typing import Any

_GEMINI_METHOD = re.compile(r"/models/([^/:]+):(embedContent|batchEmbedContents|countTokens)$")
DIMENSIONS = 8

Answer = tuple[int, Any]


def _openai_error(status: int, message: str) -> Answer:
    kind = "invalid_request_error"
    return status, {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _anthropic_error(status: int, message: str) -> Answer:
    kind = "authentication_error" if status == 401 else "invalid_request_error"
    return status, {"type": "error", "error": {"type": kind, "message": message}}


def _gemini_error(status: int, message: str) -> Answer:
    names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}
    return status, {
        "error": {"code": status, "message": message, "status": names.get(status, "INTERNAL")}
    }


def _vector(rng: random.Random) -> list[float]:
    return [round(rng.uniform(-1, 1), 6) for _ in range(DIMENSIONS)]


def _is_anthropic(headers: Mapping[str, str]) -> bool:
    return "anthropic-version" in headers or "x-api-key" in headers


def _is_gemini(path: str, headers: Mapping[str, str]) -> bool:
    return "x-goog-api-key" in headers or "key=" in path.partition("?")[2]


def _openai_auth(headers: Mapping[str, str]) -> Answer | None:
    value = headers.get("authorization", "")
    if not value.startswith("Bearer ") or not value[7:].strip():
        return _openai_error(401, "You didn't provide an API key (Authorization: Bearer).")
    return None


def _anthropic_auth(headers: Mapping[str, str]) -> Answer | None:
    if not headers.get("x-api-key"):
        return _anthropic_error(401, "x-api-key header is required")
    if not headers.get("anthropic-version"):
        return _anthropic_error(400, "anthropic-version header is required")
    return None


def _gemini_auth(path: str, headers: Mapping[str, str]) -> Answer | None:
    if headers.get("authorization"):
        return _gemini_error(401, "API keys are not supported by this API as a Bearer token")
    if not headers.get("x-goog-api-key") and "key=" not in path.partition("?")[2]:
        return _gemini_error(403, "Method doesn't allow unregistered callers (no API key)")
    return None


def answer(
    rng: random.Random, method: str, path: str, headers: Mapping[str, str], body: dict[str, Any]
) -> Answer | None:
    """The endpoint's answer (status, JSON), or None when `path` is not one of these."""
    clean = path.split("?", 1)[0].rstrip("/")
    if method == "GET" and clean.endswith("/models"):
        if _is_gemini(path, headers):
            return _gemini_auth(path, headers) or (200, _gemini_models(rng))
        if _is_anthropic(headers):
            return _anthropic_auth(headers) or (200, _anthropic_models())
        return _openai_auth(headers) or (200, _openai_models())
    if method != "POST":
        return None
    if clean.endswith("/messages/count_tokens"):
        count = max(1, len(str(body.get("messages"))) // 4) + rng.randint(0, 3)
        return _anthropic_auth(headers) or (200, {"input_tokens": count})
    found = _GEMINI_METHOD.search(clean)
    if found is not None:
        return _gemini_auth(path, headers) or _gemini(rng, found.group(2), body)
    for suffix, make in (
        ("/embeddings", _embeddings),
        ("/moderations", _moderations),
        ("/completions", _completions),
    ):
        if clean.endswith(suffix) and not clean.endswith("/chat/completions"):
            return _openai_auth(headers) or make(rng, body)
    return None


def _openai_models() -> dict[str, Any]:
    data = [
        {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "flowproof-fake"}
        for name in ("gpt-4o-mini", "text-embedding-3-small", "omni-moderation-latest")
    ]
    return {"object": "list", "data": data}


def _anthropic_models() -> dict[str, Any]:
    data = [
        {
            "type": "model",
            "id": "claude-sonnet-4-5",
            "display_name": "Claude Sonnet 4.5",
            "created_at": "2025-09-29T00:00:00Z",
        }
    ]
    return {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[0]["id"]}


def _gemini_models(rng: random.Random) -> dict[str, Any]:
    models = [
        {"name": "models/gemini-2.5-flash", "displayName": "Gemini 2.5 Flash"},
        {"name": "models/gemini-embedding-001", "displayName": "Gemini Embedding"},
    ]
    return {"models": models}


def _inputs(body: dict[str, Any]) -> list[Any]:
    value = body.get("input")
    if isinstance(value, list) and value and not isinstance(value[0], int):
        return value
    return [value]


def _embeddings(rng: random.Random, body: dict[str, Any]) -> Answer:
    if not body.get("model") or body.get("input") in (None, "", []):
        return _openai_error(400, "'model' and 'input' are required")
    packed = body.get("encoding_format") == "base64"
    data = []
    for index, _ in enumerate(_inputs(body)):
        vector = _vector(rng)
        value: Any = (
            base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            if packed
            else vector
        )
        data.append({"object": "embedding", "index": index, "embedding": value})
    usage = {"prompt_tokens": 3 * len(data), "total_tokens": 3 * len(data)}
    return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}


def _moderations(rng: random.Random, body: dict[str, Any]) -> Answer:
    results = []
    for item in _inputs(body):
        flagged = "attack" in str(item).lower()
        results.append(
            {
                "flagged": flagged,
                "categories": {"violence": flagged, "harassment": False},
                "category_scores": {"violence": rng.random() / 10 + (0.9 if flagged else 0)},
            }
        )
    ident = "modr-" + "".join(rng.choice("abcdef0123456789") for _ in range(24))
    return 200, {
        "id": ident,
        "model": body.get("model") or "omni-moderation-latest",
        "results": results,
    }


def _completions(rng: random.Random, body: dict[str, Any]) -> Answer:
    if body.get("stream"):
        return _openai_error(400, "the fake answers legacy completions unstreamed only")
    prompt = str(body.get("prompt"))
    text = f" Completed: {prompt[-20:]} #{rng.randint(1000, 9999)}"
    ident = "cmpl-" + "".join(rng.choice("abcdefABCDEF0123456789") for _ in range(24))
    return 200, {
        "id": ident,
        "object": "text_completion",
        "created": 1_700_000_000 + rng.randint(0, 10_000),
        "model": body.get("model"),
        "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10},
    }


def _gemini(rng: random.Random, method: str, body: dict[str, Any]) -> Answer:
    if "model" in body:
        return _gemini_error(400, 'Invalid JSON payload received. Unknown name "model"')
    if method == "embedContent":
        return 200, {"embedding": {"values": _vector(rng)}}
    if method == "batchEmbedContents":
        requests = body.get("requests") if isinstance(body.get("requests"), list) else []
        return 200, {"embeddings": [{"values": _vector(rng)} for _ in requests]}
    total = max(1, len(str(body.get("contents"))) // 4) + rng.randint(0, 3)
    return 200, {
        "totalTokens": total,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}],
    }
