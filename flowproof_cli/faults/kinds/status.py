"""`answer: STATUS` and `connection: reset`: the call refused the way its provider refuses.

Each provider's own error shape (its dialect's `error_body`) with the words and error type
the real service uses for that status, and the headers it sends with it: `retry-after` and
`retry-after-ms` (OpenAI, Azure, Anthropic: the SDKs read both), Google's `RetryInfo`
detail, Bedrock's `x-amzn-ErrorType`. A fault's error is retryable: no `x-should-retry:
false`, so an SDK does what it does with a real one.
"""

from __future__ import annotations

import json
import math
from http import HTTPStatus
from typing import Any

from flowproof_cli.dialects import Dialect, Rendered
from flowproof_cli.faults.kinds.call import FaultedCall
from flowproof_cli.faults.plan import Fault

#: (message, error type) by status, per provider; others fall back to the generic row.
_OPENAI = {
    429: ("Rate limit reached for requests. Please try again later.", "rate_limit_exceeded"),
    500: (
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
    ),
    502: ("Bad gateway.", "server_error"),
    503: ("The engine is currently overloaded, please try again later.", "server_error"),
}
_ANTHROPIC = {
    400: ("Invalid request.", "invalid_request_error"),
    401: ("invalid x-api-key", "authentication_error"),
    403: (
        "Your API key does not have permission to use the specified resource.",
        "permission_error",
    ),
    404: ("The requested resource could not be found.", "not_found_error"),
    413: ("Request exceeds the maximum allowed number of bytes.", "request_too_large"),
    429: ("Number of requests has exceeded your rate limit.", "rate_limit_error"),
    500: ("Internal server error", "api_error"),
    529: ("Overloaded", "overloaded_error"),
}
_GOOGLE = {
    429: ("Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED"),
    500: ("An internal error has occurred. Please retry.", "INTERNAL"),
    503: ("The model is overloaded. Please try again later.", "UNAVAILABLE"),
}
_BEDROCK = {
    400: (
        "Malformed input request, please reformat your input and try again.",
        "ValidationException",
    ),
    403: (
        "You don't have access to the model with the specified model ID.",
        "AccessDeniedException",
    ),
    408: ("Model has timed out in processing the request.", "ModelTimeoutException"),
    424: ("The model returned an error.", "ModelErrorException"),
    429: ("Too many requests, please wait before trying again.", "ThrottlingException"),
    500: ("The server encountered an internal error.", "InternalServerException"),
    503: (
        "The service is temporarily unable to handle the request.",
        "ServiceUnavailableException",
    ),
}
_WORDING = {
    "anthropic": _ANTHROPIC,
    "gemini": _GOOGLE,
    "vertex": _GOOGLE,
    "bedrock": _BEDROCK,
}
_BEDROCK_TYPE_SUFFIX = ":http://internal.amazon.com/coral/com.amazon.bedrock/"


def _wording(provider: str, status: int) -> tuple[str, str]:
    table = _WORDING.get(provider, _OPENAI)
    if status in table:
        return table[status]
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    if provider == "bedrock":
        return phrase, "InternalServerException" if status >= 500 else "ValidationException"
    if provider == "anthropic":
        return phrase, "api_error" if status >= 500 else "invalid_request_error"
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return phrase, kind


def _retry_headers(provider: str, retry_after: float | None) -> list[tuple[str, str]]:
    if retry_after is None or provider in ("gemini", "vertex", "bedrock"):
        return []  # Google says it in the body; Bedrock sends none
    return [
        ("retry-after", str(max(0, math.ceil(retry_after)))),
        ("retry-after-ms", f"{retry_after * 1000:g}"),
    ]


def _body(dialect: Dialect, status: int, retry_after: float | None) -> dict[str, Any]:
    message, kind = _wording(dialect.provider, status)
    body = dialect.error_body(message, kind, status)
    error = body.get("error") if isinstance(body, dict) else None
    if dialect.provider in ("gemini", "vertex") and isinstance(error, dict):
        details: list[Any] = [
            detail
            for detail in error.get("details", [])
            if not (isinstance(detail, dict) and detail.get("domain") == "flowproof")
        ]
        if retry_after is not None:
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{retry_after:g}s",
                }
            )
        error["details"] = details
        if not details:
            del error["details"]
    if dialect.provider == "bedrock":
        body = {"message": message}
    return body


def status_answer(dialect: Dialect, status: int, retry_after: float | None) -> Rendered:
    """The provider's own answer with HTTP `status` (public: the docs' examples use it)."""
    headers = [("x-request-id", "req_flowproof_fault")]
    if dialect.provider == "anthropic":
        headers = [("request-id", "req_flowproof_fault")]
    if dialect.provider == "bedrock":
        _, kind = _wording("bedrock", status)
        headers = [("x-amzn-errortype", kind + _BEDROCK_TYPE_SUFFIX)]
    headers += _retry_headers(dialect.provider, retry_after)
    body = json.dumps(_body(dialect, status, retry_after)).encode()
    return Rendered(status, "application/json", body, tuple(headers), retryable=True)


def answer(fault: Fault, call: FaultedCall) -> Rendered | str:
    return status_answer(call.dialect, int(fault.value), fault.retry_after)


def reset(fault: Fault, call: FaultedCall) -> Rendered | str:
    return Rendered(0, "application/json", b"", reset=True, retryable=True)
