"""The project's JSON dumpers, in one place (stdlib only, so the MCP stand-in can use them
without loading the proxy engine).

`canonical_json` is what every boundary matches and stores by; `compact_json` is the same
spelling with the keys left in their order, for bytes a client reads as a server sent them
(synthesized SSE events, JSON-RPC frames).
"""

from __future__ import annotations

import json
from typing import Any

_TIGHT = (",", ":")
# Built once: `json.dumps` with any non-default option builds a new encoder per call, which
# costs more than encoding a small SSE chunk. Parsed JSON has no cycles to check for.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=_TIGHT, ensure_ascii=False, check_circular=False
)
_COMPACT = json.JSONEncoder(separators=_TIGHT, ensure_ascii=False, check_circular=False)
_KEY = json.JSONEncoder(sort_keys=True, separators=_TIGHT, check_circular=False)


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace: equal JSON gives equal text."""
    return _CANONICAL.encode(value)


def compact_json(value: Any) -> str:
    """No insignificant whitespace, keys in the order given (the wire order a client sees)."""
    return _COMPACT.encode(value)


def canonical_ascii(value: Any) -> bytes:
    """`canonical_json` with non-ASCII escaped, as bytes: equal exactly when canonical_json
    is equal, cheaper to encode, and defined for lone surrogates (for hashing, never shown)."""
    return _KEY.encode(value).encode("ascii")


def sorted_keys(value: Any) -> Any:
    """A deep copy with every mapping's keys sorted, so serialization never depends on the
    order in which fields arrived."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def parse_or(raw: str | bytes, default: Any = None) -> Any:
    """`raw` parsed as JSON, or `default` when it is not JSON (a reader that must go on)."""
    try:
        return json.loads(raw)
    except ValueError:
        return default
