"""Field-level differences between two JSON values, as `path: recorded X, replayed Y` lines."""

from __future__ import annotations

import json
from typing import Any

MAX_SHOWN = 80  # characters of a value shown in a message


def show(value: Any, limit: int = MAX_SHOWN) -> str:
    """A value as a short, readable token for a one-line message."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dotted(path: list[Any], prefix: str) -> str:
    parts = [prefix] if prefix else []
    parts.extend(str(part) for part in path)
    return ".".join(parts) or "(root)"


def field_changes(recorded: Any, replayed: Any, *, prefix: str = "", limit: int = 3) -> list[str]:
    """The first few changed paths, most specific first, in a stable order."""
    from deepdiff import DeepDiff  # noqa: PLC0415 - only a divergence pays its import

    diff = DeepDiff(recorded, replayed, verbose_level=2, view="tree")
    lines: list[tuple[str, str]] = []
    for kind, items in diff.items():
        for item in items:
            path = _dotted(item.path(output_format="list"), prefix)
            if kind in ("values_changed", "type_changes"):
                line = f"{path}: recorded {show(item.t1)}, replayed {show(item.t2)}"
            elif kind in ("dictionary_item_added", "iterable_item_added", "attribute_added"):
                line = f"{path}: added in replay ({show(item.t2)})"
            elif kind in ("dictionary_item_removed", "iterable_item_removed", "attribute_removed"):
                line = f"{path}: missing in replay (recorded {show(item.t1)})"
            else:
                line = f"{path}: {kind.replace('_', ' ')}"
            lines.append((path, line))
    lines.sort()
    shown = [line for _, line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"... and {len(lines) - limit} more change(s)")
    return shown
