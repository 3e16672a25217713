"""JSON-RPC messages of MCP: what kind each is, and the canonical form of a client request.

The canonical form is what a lane stores and replay compares: the method and the params
with every transport and volatile detail removed.

- The request id: replies carry the agent's own ids, so ids are never stored or matched.
- `initialize`: `clientInfo` and `capabilities` are dropped (an SDK patch bump must not
  break a trace); `protocolVersion` stays and is matched.
- `_meta` (both eras): only the protocol fields that change behaviour stay
  (`io.modelcontextprotocol/protocolVersion` and `.../logLevel`); volatile values
  (`progressToken`, `clientInfo`, `clientCapabilities`, tracing keys, ...) are dropped.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

META_PREFIX = "io.modelcontextprotocol/"
PROTOCOL_VERSION_META = META_PREFIX + "protocolVersion"
SUBSCRIPTION_ID_META = META_PREFIX + "subscriptionId"
#: `_meta` keys kept in the canonical form: they are part of what the agent asked for.
KEPT_META = frozenset({PROTOCOL_VERSION_META, META_PREFIX + "logLevel"})
#: initialize params that describe the client, not the request.
DROPPED_INITIALIZE_PARAMS = frozenset({"clientInfo", "capabilities"})
#: Liveness checks, sent on timers by either side: answered at once, never in a lane (a
#: keep-alive ping between two calls must not shift every later position).
PING = "ping"
#: A server's progress on a call (names the call by its progress token), and a client's
#: cancellation of one (names it by its request id: the server need not answer it then).
PROGRESS = "notifications/progress"
CANCELLED = "notifications/cancelled"
#: JSON-RPC's error codes flowproof answers with: a body that is not JSON, a message that
#: is not a valid request, and a failure on the server's side (it died, it sent garbage).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603
#: Only this revision allows a top-level JSON-RPC batch.
BATCH_PROTOCOL_VERSION = "2025-03-26"
#: The handshake era, whose streamable HTTP has SSE event ids and `Last-Event-ID` resumption.
RESUMABLE_VERSIONS = frozenset({"2025-03-26", "2025-06-18", "2025-11-25"})


class Kind(StrEnum):
    REQUEST = "request"  # method and id: answered by the peer
    NOTIFICATION = "notification"  # method, no id
    RESPONSE = "response"  # id and result or error
    INVALID = "invalid"


def kind_of(message: Any) -> Kind:
    if not isinstance(message, dict):
        return Kind.INVALID
    has_id = "id" in message and message["id"] is not None
    if isinstance(message.get("method"), str):
        return Kind.REQUEST if has_id else Kind.NOTIFICATION
    if "id" in message and ("result" in message or "error" in message):
        return Kind.RESPONSE
    return Kind.INVALID


def usable_id(message: Any) -> Any:
    """The id of an invalid message when it can be told (a string or a number), else None:
    the error then reaches the call that is waiting for it, as JSON-RPC asks."""
    value = message.get("id") if isinstance(message, dict) else None
    valid = isinstance(value, (str, int, float)) and not isinstance(value, bool)
    return value if valid else None


def id_key(value: Any) -> str:
    """Ids compare by type and value: `1` and `"1"` are different requests."""
    return f"{type(value).__name__}:{value}"


def canonical_params(method: str, params: Any) -> dict[str, Any] | None:
    if params is None:
        return None
    if not isinstance(params, dict):
        return {"(params)": params}
    canonical = {key: value for key, value in params.items() if key != "_meta"}
    if method == "initialize":
        for key in DROPPED_INITIALIZE_PARAMS:
            canonical.pop(key, None)
    meta = params.get("_meta")
    if isinstance(meta, dict):
        kept = {key: meta[key] for key in sorted(meta) if key in KEPT_META}
        if kept:
            canonical["_meta"] = kept
    return canonical


def canonical_request(message: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    method = str(message.get("method"))
    return method, canonical_params(method, message.get("params"))


def answer_of(message: dict[str, Any]) -> dict[str, Any]:
    """`{"result": ...}` or `{"error": ...}` of a response message."""
    if "error" in message and message["error"] is not None:
        return {"error": message["error"]}
    return {"result": message.get("result")}


def progress_token(message: dict[str, Any]) -> Any:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None


def requested_version(method: str, params: Any) -> Any:
    """The protocol version a request asks for (initialize param or 2026 `_meta`), unchecked."""
    if not isinstance(params, dict):
        return None
    if method == "initialize" and "protocolVersion" in params:
        return params["protocolVersion"]
    meta = params.get("_meta")
    return meta.get(PROTOCOL_VERSION_META) if isinstance(meta, dict) else None


def batch_refusal(negotiated: str | None) -> str | None:
    """Why a JSON-RPC batch is refused in a session that negotiated `negotiated`, or None."""
    if negotiated == BATCH_PROTOCOL_VERSION:
        return None
    return (
        f"a JSON-RPC batch is only allowed in protocol {BATCH_PROTOCOL_VERSION} (this session "
        f"negotiated {negotiated or 'none'})"
    )


def is_modern(message: dict[str, Any]) -> bool:
    """A 2026-era request: it carries its protocol version in `_meta`."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META in meta


def error_message(request_id: Any, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


def with_id(request_id: Any, answer: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, **answer}
