"""OpenAI's endpoints around chat: embeddings, moderations, the model list, legacy completions.

Each is a turn of its own (dialects/endpoint.py), under the same base URL and Bearer key as
Chat Completions. `POST .../embeddings` answers vectors (floats, or base64 strings of
little-endian float32 when `encoding_format: base64`, the openai SDK's default), `POST
.../moderations` a verdict per input, `GET .../models` the model list, and `POST
.../completions` the legacy text completion, plain or streamed (`text_completion` chunks,
then `[DONE]`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, ClassVar

from flowproof_cli.dialects.base import JSON, text_of
from flowproof_cli.dialects.endpoint import Endpoint, count
from flowproof_cli.dialects.sse import data_event, piece_size, split_deltas


def _dimensions(embedding: Any) -> int | None:
    """How many numbers one embedding holds (a base64 one decoded as float32)."""
    if isinstance(embedding, list):
        return len(embedding)
    if isinstance(embedding, str):
        try:
            return len(base64.b64decode(embedding, validate=True)) // 4
        except (binascii.Error, ValueError):
            return None
    return None


def vectors(items: Any, key: str) -> str:
    """`2 vectors of 1536` for a list of objects holding their embedding under `key`."""
    found = (
        [item.get(key) for item in items if isinstance(item, dict)]
        if isinstance(items, list)
        else []
    )
    sizes = sorted({size for size in map(_dimensions, found) if size is not None})
    shape = f" of {', '.join(map(str, sizes))}" if sizes else ""
    return f"{count(found, 'vector')}{shape}"


class OpenAIEmbeddings(Endpoint):
    """`POST .../embeddings`: `input` (a text, texts, or token arrays) to vectors."""

    name = "openai-embeddings"
    provider = "openai"
    route_suffixes = ("embeddings",)
    example_request: ClassVar[JSON] = {
        "model": "text-embedding-3-small",
        "input": ["What is the refund policy?"],
        "encoding_format": "float",
    }

    def describe_answer(self, response: JSON) -> str:
        return vectors(response.get("data"), "embedding")

    def canned_response(self, request: JSON, text: str) -> JSON:
        inputs = request.get("input")
        number = len(inputs) if isinstance(inputs, list) and inputs else 1
        if isinstance(inputs, list) and inputs and isinstance(inputs[0], int):
            number = 1  # one token array
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": index, "embedding": [0.0] * 8}
                for index in range(number)
            ],
            "model": request.get("model") or "flowproof-doctor",
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }


class OpenAIModerations(Endpoint):
    """`POST .../moderations`: `input` (texts, or text and image parts) to verdicts."""

    name = "openai-moderations"
    provider = "openai"
    route_suffixes = ("moderations",)
    example_request: ClassVar[JSON] = {
        "model": "omni-moderation-latest",
        "input": "I want to book a flight.",
    }

    def describe_answer(self, response: JSON) -> str:
        results = response.get("results")
        flagged = [
            result
            for result in results or []
            if isinstance(result, dict) and result.get("flagged") is True
        ]
        return f"{count(results, 'result')}, {len(flagged)} flagged"

    def canned_response(self, request: JSON, text: str) -> JSON:
        inputs = request.get("input")
        number = len(inputs) if isinstance(inputs, list) and inputs else 1
        return {
            "id": "modr-flowproof-doctor",
            "model": request.get("model") or "omni-moderation-latest",
            "results": [
                {"flagged": False, "categories": {}, "category_scores": {}} for _ in range(number)
            ],
        }


def model_ids(models: Any, key: str = "id") -> str:
    """`3 models: a, b, c` (the first five named)."""
    names = (
        [str(m.get(key)) for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    )
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    return f"{count(names, 'model')}{': ' + shown if shown else ''}"


class OpenAIModels(Endpoint):
    """`GET .../models`: the model list (a client probing what it may call)."""

    name = "openai-models"
    provider = "openai"
    method = "GET"
    route_suffixes = ("models",)
    input_fields = ("query",)
    conversation_key = "query"
    example_request: ClassVar[JSON] = {}

    def describe_request(self, request: JSON) -> str:
        query = request.get("query")
        return f"list models {query}" if query else "list models"

    def describe_answer(self, response: JSON) -> str:
        return model_ids(response.get("data"))

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {
            "object": "list",
            "data": [
                {"id": "flowproof-doctor", "object": "model", "created": 0, "owned_by": "flowproof"}
            ],
        }


class OpenAICompletions(Endpoint):
    """`POST .../completions` (legacy): `prompt` to `choices[].text`, plain or streamed.

    The route `completions` also ends `chat/completions`: routing takes the longest suffix,
    so chat stays chat.
    """

    name = "openai-completions"
    provider = "openai"
    route_suffixes = ("completions",)
    input_fields = ("prompt", "suffix")
    conversation_key = "prompt"
    streams = True
    example_request: ClassVar[JSON] = {
        "model": "gpt-3.5-turbo-instruct",
        "prompt": "Say hello.",
        "max_tokens": 16,
    }

    def claims(self, path: str, headers: Mapping[str, str]) -> bool | None:
        """Never a chat path (`.../chat/completions` is Chat Completions)."""
        return False if path.split("?", 1)[0].rstrip("/").endswith("/chat/completions") else None

    def describe_answer(self, response: JSON) -> str:
        choices = [c for c in response.get("choices") or [] if isinstance(c, dict)]
        texts = [text_of(choice.get("text")) for choice in choices]
        if len(texts) == 1:
            return f"text: {texts[0]}"
        return f"{count(texts, 'choice')}: " + " | ".join(texts)

    def stream_events(self, request: JSON, response: JSON) -> str:
        envelope = {
            "id": response.get("id", "cmpl-flowproof"),
            "object": "text_completion",
            "created": response.get("created", 0),
            "model": response.get("model", request.get("model")),
        }
        if "system_fingerprint" in response:
            envelope["system_fingerprint"] = response["system_fingerprint"]
        size = piece_size(response)
        events = []
        for choice in response.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            for fragment in split_deltas(text_of(choice.get("text")), size):
                piece = {"text": fragment, "index": index, "logprobs": None, "finish_reason": None}
                events.append(data_event({**envelope, "choices": [piece]}))
            last = {
                "text": "",
                "index": index,
                "logprobs": choice.get("logprobs"),
                "finish_reason": choice.get("finish_reason", "stop"),
            }
            events.append(data_event({**envelope, "choices": [last]}))
        options = request.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            events.append(data_event({**envelope, "choices": [], "usage": response.get("usage")}))
        events.append("data: [DONE]\n\n")
        return "".join(events)

    def reassemble_events(self, events: list[tuple[str, Any]]) -> JSON:
        """Each choice's text fragments joined by index; the envelope of the first chunk."""
        head: JSON = {}
        choices: dict[int, JSON] = {}
        for _, payload in events:
            if not isinstance(payload, dict):
                continue
            head = head or {k: v for k, v in payload.items() if k != "choices"}
            if payload.get("usage") is not None:
                head["usage"] = payload["usage"]
            for choice in payload.get("choices") or []:
                if not isinstance(choice, dict):
                    continue
                raw = choice.get("index")
                index = raw if isinstance(raw, int) else 0
                entry = choices.setdefault(index, {"text": "", "index": index})
                entry["text"] += str(choice.get("text") or "")
                if choice.get("finish_reason"):
                    entry["finish_reason"] = choice["finish_reason"]
        return {**head, "choices": [choices[i] for i in sorted(choices)]}

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {
            "id": "cmpl-flowproof-doctor",
            "object": "text_completion",
            "created": 0,
            "model": request.get("model") or "flowproof-doctor",
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
