"""Wire dialects, and the routing of a request path to the one that speaks it."""

from __future__ import annotations

from flowproof_cli.dialects.anthropic import AnthropicMessages
from flowproof_cli.dialects.base import Dialect, Rendered, RequestOutline
from flowproof_cli.dialects.bedrock import BedrockConverse
from flowproof_cli.dialects.bedrock_invoke import BedrockInvoke
from flowproof_cli.dialects.gemini import GeminiGenerateContent
from flowproof_cli.dialects.openai_chat import OpenAIChat
from flowproof_cli.dialects.openai_responses import OpenAIResponses
from flowproof_cli.routes import DEFAULT_PROTOCOL  # a trace's default, kept below the trace

DIALECTS: tuple[Dialect, ...] = (
    OpenAIChat(),
    OpenAIResponses(),
    AnthropicMessages(),
    GeminiGenerateContent(),
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


def route(path: str) -> Dialect | None:
    """The dialect whose route suffix ends this path (query string ignored).

    Matching on the suffix lets a doubled `/v1/v1/...` or a base without `/v1` still work.
    A suffix starting with `:` is a method on a resource (Gemini's
    `.../models/<model>:generateContent`): it ends the last segment, after a resource name.
    """
    clean = path.split("?", 1)[0].rstrip("/")
    last = clean.rsplit("/", 1)[-1]
    for dialect in DIALECTS:
        for suffix in dialect.route_suffixes:
            if suffix.startswith(":"):
                if last.endswith(suffix) and len(last) > len(suffix):
                    return dialect
            elif clean == f"/{suffix}" or clean.endswith(f"/{suffix}"):
                return dialect
    return None


__all__ = [
    "DEFAULT_PROTOCOL",
    "DIALECTS",
    "Dialect",
    "Rendered",
    "RequestOutline",
    "dialect_named",
    "route",
]
