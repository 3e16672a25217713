"""Cohere's calls around the chat: `/v2/embed`, `/v2/rerank` and `/v1/rerank`.

`/v2/embed` takes `texts` (or `images`, or mixed `inputs`), `input_type` and
`embedding_types`, and answers `{id, embeddings: {float: [[...]], int8: ...}, texts, meta,
response_type}`. Rerank takes a `query` and `documents` (strings; v1 also objects) and
answers `{id, results: [{index, relevance_score}], meta}`. v1 and v2 rerank are two
protocols, so a recording of one never answers the other. None is streamed; all are
endpoints: turns of their own, matched strictly by body, never the reply.
"""

from __future__ import annotations

from typing import ClassVar

from flowproof_cli.dialects.base import JSON
from flowproof_cli.dialects.cohere import cohere_error_body, cohere_upstream_url
from flowproof_cli.dialects.endpoint import count
from flowproof_cli.dialects.provider_endpoint import ProviderEndpoint


class _CohereEndpoint(ProviderEndpoint):
    provider = "cohere"
    auth_headers = ("authorization",)

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        return cohere_upstream_url(base_url, path)

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return cohere_error_body(message, kind, status)


class CohereEmbed(_CohereEndpoint):
    """`/v2/embed`: vectors of each asked embedding type, one per input."""

    name = "cohere-embed"
    route_suffixes = ("v2/embed",)
    input_fields = ("texts", "images", "inputs")
    conversation_key = "texts"
    example_request: ClassVar[JSON] = {
        "model": "embed-v4.0",
        "texts": ["Say hello."],
        "input_type": "search_query",
        "embedding_types": ["float"],
    }

    def describe_answer(self, response: JSON) -> str:
        embeddings = response.get("embeddings")
        if isinstance(embeddings, list):  # the older `embeddings_floats` shape
            embeddings = {"float": embeddings}
        if not isinstance(embeddings, dict) or not embeddings:
            return "no vectors"
        shown = []
        for kind, vectors in embeddings.items():
            first = vectors[0] if isinstance(vectors, list) and vectors else None
            size = f" of {len(first)}" if isinstance(first, list) else ""
            shown.append(f"{count(vectors, f'{kind} vector')}{size}")
        return ", ".join(shown)

    def canned_response(self, request: JSON, text: str) -> JSON:
        texts = request.get("texts") or [text]
        return {
            "id": "flowproof-doctor",
            "embeddings": {"float": [[0.0, 0.0, 0.0] for _ in texts]},
            "texts": texts,
            "response_type": "embeddings_by_type",
        }


class CohereRerank(_CohereEndpoint):
    """`/v2/rerank`: the documents' indexes by relevance to the query."""

    name = "cohere-rerank"
    route_suffixes = ("v2/rerank",)
    input_fields = ("query", "documents")
    conversation_key = "query"
    example_request: ClassVar[JSON] = {
        "model": "rerank-v3.5",
        "query": "Say hello.",
        "documents": ["hello", "goodbye"],
    }

    def describe_answer(self, response: JSON) -> str:
        results = response.get("results")
        ranked = (
            [
                f"{result.get('index')} ({result.get('relevance_score')})"
                for result in results
                if isinstance(result, dict)
            ]
            if isinstance(results, list)
            else []
        )
        return f"{count(results, 'result')}: {', '.join(ranked)}" if ranked else "no results"

    def canned_response(self, request: JSON, text: str) -> JSON:
        documents = request.get("documents") or []
        return {
            "id": "flowproof-doctor",
            "results": [{"index": i, "relevance_score": 0.5} for i in range(len(documents))],
        }


class CohereRerankV1(CohereRerank):
    """`/v1/rerank`: the same call in v1 (documents may be objects; `return_documents`)."""

    name = "cohere-rerank-v1"
    route_suffixes = ("v1/rerank",)
