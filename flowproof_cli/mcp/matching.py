"""Positional matching of a replayed MCP request against the recorded call at its position.

Coarse to fine, one line: the method, then for `tools/call` the tool name, then the
protocol version, then a field-level diff of the arguments (or other params) naming the
first divergent path: `arguments.path: recorded a.txt, replayed b.txt`.
"""

from __future__ import annotations

from typing import Any

from flowproof_cli.canonical import canonical_json
from flowproof_cli.cassette.diff import contrast, field_changes, show
from flowproof_cli.mcp.canonical import requested_version
from flowproof_cli.mcp.lane import Call


def _first_change(recorded: Any, replayed: Any, prefix: str) -> str:
    changes = field_changes(recorded, replayed, prefix=prefix, limit=1)
    return changes[0] if changes else f"{prefix}: changed"


def compare_call(recorded: Call, method: str, params: dict[str, Any] | None) -> str | None:
    """None when the request matches the recorded call, else the first difference."""
    if recorded.method != method:
        return f"method: recorded {recorded.method}, replayed {method}"
    if canonical_json(recorded.params) == canonical_json(params):
        return None
    old, new = recorded.params or {}, params or {}
    if method == "tools/call" and old.get("name") != new.get("name"):
        return f"tool: {contrast(old.get('name'), new.get('name'))[0]}"
    old_version, new_version = requested_version(method, old), requested_version(method, new)
    if old_version != new_version:
        return f"protocolVersion: recorded {show(old_version)}, replayed {show(new_version)}"
    if "arguments" in old or "arguments" in new:
        old_args, new_args = old.get("arguments"), new.get("arguments")
        if canonical_json(old_args) != canonical_json(new_args):
            if isinstance(old_args, dict) and isinstance(new_args, dict):
                return _first_change(old_args, new_args, "arguments")
            return f"arguments: recorded {show(old_args)}, replayed {show(new_args)}"
    return _first_change(old, new, "params")


def compare_answer(recorded: dict[str, Any] | None, replayed: dict[str, Any]) -> str | None:
    """The agent's answer to a server-initiated request, against the recorded one."""
    if recorded is None:
        return None
    if canonical_json(recorded) == canonical_json(replayed):
        return None
    if ("error" in recorded) != ("error" in replayed):
        before = "an error" if "error" in recorded else "a result"
        after = "an error" if "error" in replayed else "a result"
        return f"answer: recorded {before}, replayed {after}"
    return _first_change(recorded, replayed, "")
