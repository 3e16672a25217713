"""Wire dialects, and the routing of a request path to the one that speaks it."""

from __future__ import annotations

from collections.abc import Mapping

from flowproof_cli.dialects.anthropic import AnthropicMessages
from flowproof_cli.dialects.azure import AzureChat, AzureResponses
from flowproof_cli.dialects.base import PROVIDERS, Dialect, Rendered, RequestOutline
from flowproof_cli.dialects.gemini import GeminiGenerateContent
from flowproof_cli.dialects.openai_chat import OpenAIChat
from flowproof_cli.dialects.openai_responses import OpenAIResponses
from flowproof_cli.dialects.vertex import VertexAnthropic, VertexGemini
from flowproof_cli.routes import DEFAULT_PROTOCOL  # a trace's default, kept below the trace

DIALECTS: tuple[Dialect, ...] = (
    OpenAIChat(),
    OpenAIResponses(),
    AnthropicMessages(),
    GeminiGenerateContent(),
    VertexGemini(),
    VertexAnthropic(),
    AzureChat(),
    AzureResponses(),
)
_BY_NAME = {dialect.name: dialect for dialect in DIALECTS}


def dialect_named(name: str) -> Dialect:
    """The dialect for a protocol tag stored in a trace."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(_BY_NAME))
        raise KeyError(f"unknown protocol {name!r} (known: {known})") from None


_NO_HEADERS: Mapping[str, str] = {}


def _ends(dialect: Dialect, clean: str, last: str) -> bool:
    """Whether one of the dialect's suffixes ends `clean`. A suffix starting with `:` is a
    method on a resource (Gemini's `.../models/<model>:generateContent`): it ends the last
    segment, after a resource name."""
    for suffix in dialect.route_suffixes:
        if suffix.startswith(":"):
            if last.endswith(suffix) and len(last) > len(suffix):
                return True
        elif clean == f"/{suffix}" or clean.endswith(f"/{suffix}"):
            return True
    return False


def route(path: str, headers: Mapping[str, str] | None = None) -> Dialect | None:
    """The dialect that speaks this request, from its path (query string ignored) and, when
    the caller has them, its headers (lower-case names, or mitmproxy's case-insensitive
    `Headers`).

    Matching on the suffix lets a doubled `/v1/v1/...` or a base without `/v1` still work.
    Among the dialects whose suffix ends the path, one that `claims` the request wins (Azure's
    `/deployments/<d>/...`, or `/openai/v1/...` sent with `api-key`), then the first that
    does not decline it.
    """
    clean = path.split("?", 1)[0].rstrip("/")
    last = clean.rsplit("/", 1)[-1]
    seen = _NO_HEADERS if headers is None else headers
    fallback: Dialect | None = None
    for dialect in DIALECTS:
        if not _ends(dialect, clean, last):
            continue
        claim = dialect.claims(path, seen)
        if claim is True:
            return dialect
        if claim is None and fallback is None:
            fallback = dialect
    return fallback


__all__ = [
    "DEFAULT_PROTOCOL",
    "DIALECTS",
    "PROVIDERS",
    "Dialect",
    "Rendered",
    "RequestOutline",
    "dialect_named",
    "route",
]
