"""Wire dialects, and the routing of a request path to the one that speaks it."""

from __future__ import annotations

from collections.abc import Mapping

from flowproof_cli.dialects.anthropic import AnthropicMessages
from flowproof_cli.dialects.anthropic_endpoints import AnthropicCountTokens, AnthropicModels
from flowproof_cli.dialects.azure import (
    AzureChat,
    AzureCompletions,
    AzureEmbeddings,
    AzureResponses,
)
from flowproof_cli.dialects.base import CHAT, ENDPOINT, Dialect, Rendered, RequestOutline
from flowproof_cli.dialects.bedrock import BedrockConverse
from flowproof_cli.dialects.bedrock_invoke import BedrockInvoke
from flowproof_cli.dialects.cohere import CohereChat
from flowproof_cli.dialects.cohere_endpoints import CohereEmbed, CohereRerank, CohereRerankV1
from flowproof_cli.dialects.gemini import GeminiGenerateContent
from flowproof_cli.dialects.gemini_endpoints import (
    GeminiBatchEmbedContents,
    GeminiCountTokens,
    GeminiEmbedContent,
    GeminiModels,
)
from flowproof_cli.dialects.ollama import OllamaChat
from flowproof_cli.dialects.ollama_endpoints import OllamaEmbed, OllamaEmbeddings, OllamaGenerate
from flowproof_cli.dialects.openai_chat import OpenAIChat
from flowproof_cli.dialects.openai_endpoints import (
    OpenAICompletions,
    OpenAIEmbeddings,
    OpenAIModels,
    OpenAIModerations,
)
from flowproof_cli.dialects.openai_responses import OpenAIResponses
from flowproof_cli.dialects.vertex import VertexAnthropic, VertexGemini
from flowproof_cli.providers import PROVIDERS
from flowproof_cli.routes import DEFAULT_PROTOCOL  # a trace's default, kept below the trace

DIALECTS: tuple[Dialect, ...] = (
    OpenAIChat(),
    OpenAIResponses(),
    AnthropicMessages(),
    GeminiGenerateContent(),
    # Endpoints around the conversation (dialects/endpoint.py).
    OpenAIEmbeddings(),
    OpenAIModerations(),
    OpenAIModels(),
    OpenAICompletions(),
    AnthropicCountTokens(),
    AnthropicModels(),
    GeminiEmbedContent(),
    GeminiBatchEmbedContents(),
    GeminiCountTokens(),
    GeminiModels(),
    # Ollama's native API and Cohere v2 (dialects/ollama*.py, dialects/cohere*.py).
    OllamaChat(),
    OllamaEmbed(),
    OllamaEmbeddings(),
    OllamaGenerate(),
    CohereChat(),
    CohereEmbed(),
    CohereRerank(),
    CohereRerankV1(),
    VertexGemini(),
    VertexAnthropic(),
    AzureChat(),
    AzureResponses(),
    AzureEmbeddings(),
    AzureCompletions(),
    # Amazon Bedrock (dialects/bedrock.py, bedrock_invoke.py).
    BedrockConverse(),
    BedrockInvoke(),
)
_BY_NAME = {dialect.name: dialect for dialect in DIALECTS}


def dialect_named(name: str) -> Dialect:
    """The dialect for a protocol tag stored in a trace."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(_BY_NAME))
        raise KeyError(f"unknown protocol {name!r} (known: {known})") from None


#: Every request header a dialect reads a client's credential from: none is ever forwarded.
AUTH_HEADERS: tuple[str, ...] = tuple(
    dict.fromkeys(name for dialect in DIALECTS for name in dialect.auth_headers)
)
_NO_HEADERS: Mapping[str, str] = {}


def _suffix_length(dialect: Dialect, clean: str, last: str) -> int:
    """The length of the longest of the dialect's suffixes that ends `clean`, else -1.

    A suffix starting with `:` is a method on a resource (Gemini's
    `.../models/<model>:generateContent`): it ends the last segment, after a resource name.
    """
    best = -1
    for suffix in dialect.route_suffixes:
        if suffix.startswith(":"):
            if last.endswith(suffix) and len(last) > len(suffix):
                best = max(best, len(suffix))
        elif clean == f"/{suffix}" or clean.endswith(f"/{suffix}"):
            best = max(best, len(suffix))
    return best


def route(
    path: str, headers: Mapping[str, str] | None = None, method: str | None = None
) -> Dialect | None:
    """The dialect that speaks this request, from its path (query string ignored), and when
    the caller has them its headers (lower-case names, or mitmproxy's case-insensitive
    `Headers`) and method (a GET dialect, a listing, answers only a GET; a POST dialect
    answers any method, and refuses what is not a JSON body, as it always has).

    Matching on the suffix lets a doubled `/v1/v1/...` or a base without `/v1` still work.
    Among the dialects whose suffix ends the path, one that `claims` the request wins, then
    the longest suffix (`chat/completions` before `completions`); a dialect that declines it
    never answers it. Registration order does not matter.
    """
    clean = path.split("?", 1)[0].rstrip("/")
    last = clean.rsplit("/", 1)[-1]
    seen = _NO_HEADERS if headers is None else headers
    best: tuple[bool, int] | None = None
    chosen: Dialect | None = None
    for dialect in DIALECTS:
        if dialect.method == "GET" and method is not None and method.upper() != "GET":
            continue
        length = _suffix_length(dialect, clean, last)
        if length < 0:
            continue
        claim = dialect.claims(path, seen)
        if claim is False:
            continue
        rank = (claim is True, length)
        if best is None or rank > best:
            best, chosen = rank, dialect
    return chosen


__all__ = [
    "AUTH_HEADERS",
    "CHAT",
    "DEFAULT_PROTOCOL",
    "DIALECTS",
    "ENDPOINT",
    "PROVIDERS",
    "Dialect",
    "Rendered",
    "RequestOutline",
    "dialect_named",
    "route",
]
