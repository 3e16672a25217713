"""Field shapes and checks the spec, suite and `match:` models share, declared once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field


def optional(description: str) -> Any:
    """An optional value, None when not given."""
    return Field(default=None, description=description)


def optional_text(description: str) -> Any:
    """An optional string that, when given, is not empty."""
    return Field(default=None, min_length=1, description=description)


def listed(description: str) -> Any:
    """A list that defaults to empty."""
    return Field(default_factory=list, description=description)


def optional_list(description: str) -> Any:
    """An optional non-empty list: None when not given; the schema shows only the list."""

    def only_the_list(schema: dict[str, Any]) -> None:
        schema.pop("anyOf", None)
        schema.pop("default", None)
        schema.update({"type": "array", "minItems": 1})

    return Field(default=None, description=description, json_schema_extra=only_the_list)


def optional_port(description: str) -> Any:
    """An optional TCP port number."""
    return Field(default=None, ge=1, le=65535, description=description)


def first_repeat(names: Iterable[str]) -> tuple[int, int] | None:
    """The index of the first name seen before, with the index where it was first seen."""
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in seen:
            return index, seen[name]
        seen[name] = index
    return None
