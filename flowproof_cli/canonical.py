"""Canonical JSON: the one definition every boundary matches and stores by (stdlib only,
so the MCP stand-in can use it without loading the proxy engine)."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace: equal JSON gives equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sorted_keys(value: Any) -> Any:
    """A deep copy with every mapping's keys sorted, so serialization never depends on the
    order in which fields arrived."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value
