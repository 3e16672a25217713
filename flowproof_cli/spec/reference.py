"""The spec reference (docs/reference/spec.md), generated from the JSON Schema of the models.

The schema is itself generated from the pydantic models, so a key, a type or a description
changed in a spec model changes this page; a unit test keeps the committed page equal to the
output, so it cannot drift. Regenerate with:

    .venv/bin/python -m flowproof_cli.spec.reference > docs/reference/spec.md
"""

from __future__ import annotations

import json
import sys
from typing import Any

from flowproof_cli.spec.schema import spec_json_schema

REGENERATE = ".venv/bin/python -m flowproof_cli.spec.reference > docs/reference/spec.md"

_INTRO = """\
# Flow spec reference

<!-- Generated from the spec models by `{command}`. Do not edit by hand:
     a unit test fails when this page and the models disagree. -->

Every key of a `*.flow.yaml`, as the loader accepts it. The guide with examples and the rules
between keys is [../spec.md](../spec.md); `flowproof schema` prints the same models as JSON
Schema. Unknown keys are errors everywhere.
"""


def spec_reference_markdown() -> str:
    """The whole reference page, one section per mapping, top level first."""
    schema = spec_json_schema()
    definitions: dict[str, Any] = schema.get("$defs", {})
    sections = [_INTRO.format(command=REGENERATE), _section("Top level", schema)]
    sections.extend(_section(name, definitions[name]) for name in sorted(definitions))
    return "\n".join(sections)


def _section(title: str, node: dict[str, Any]) -> str:
    lines = [f"## {title}" if title == "Top level" else f"## `{title}`", ""]
    description = " ".join(str(node.get("description", "")).split())
    if description:
        lines += [description, ""]
    properties: dict[str, Any] = node.get("properties", {})
    required = set(node.get("required", []))
    lines += ["| Key | Type | Required | Meaning |", "|---|---|---|---|"]
    for key, spec in properties.items():
        meaning = " ".join(str(spec.get("description", "")).split())
        if "default" in spec and spec["default"] not in (None, [], {}):
            meaning += f" Default: `{_literal(spec['default'])}`."
        row = [f"`{key}`", _type(spec), "yes" if key in required else "no", meaning]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    rules = _rules(node)
    if rules:
        lines += ["", *rules]
    return "\n".join(lines) + "\n"


def _rules(node: dict[str, Any]) -> list[str]:
    """The constraints between keys the schema states (one of, not together)."""
    rules: list[str] = []
    one_of = [option.get("required", []) for option in node.get("oneOf", [])]
    if one_of and all(len(keys) == 1 for keys in one_of):
        names = " or ".join(f"`{keys[0]}`" for keys in one_of)
        rules.append(f"Exactly one of {names}.")
    excluded = node.get("not", {}).get("required", [])
    if excluded:
        rules.append("Not together: " + ", ".join(f"`{key}`" for key in excluded) + ".")
    return rules


def _type(spec: dict[str, Any]) -> str:
    """A short human reading of one property's schema."""
    if "$ref" in spec:
        name = str(spec["$ref"]).rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    if "const" in spec:
        return f"`{_literal(spec['const'])}`"
    if "enum" in spec:
        return " or ".join(f"`{_literal(value)}`" for value in spec["enum"])
    for key in ("anyOf", "oneOf"):
        if key in spec:
            pattern = {"pattern": spec["pattern"]} if "pattern" in spec else {}
            options = [
                {**option, **pattern} if option.get("type") == "string" else option
                for option in spec[key]
                if option.get("type") != "null"
            ]
            return " or ".join(dict.fromkeys(_type(option) for option in options))
    kind = spec.get("type")
    if kind == "array":
        text = f"list of {_type(spec.get('items', {}))}"
        return text + (f" (at least {spec['minItems']})" if spec.get("minItems") else "")
    if kind == "object":
        extra = spec.get("additionalProperties")
        return f"mapping of text to {_type(extra)}" if isinstance(extra, dict) else "mapping"
    if kind in {"integer", "number"}:
        signs = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="))
        bounds = [f"{sign} {spec[key]}" for key, sign in signs if key in spec]
        word = "whole number" if kind == "integer" else "number"
        return f"{word} {', '.join(bounds)}".strip()
    if kind == "string":
        return "text" + (f" matching `{spec['pattern']}`" if "pattern" in spec else "")
    if kind == "boolean":
        return "`true` / `false`"
    if kind is None:
        return "any JSON value"
    return str(kind)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and not value.isprintable():
        return json.dumps(value)  # as YAML's double quotes write it: "...\\n", on one row
    return str(value)


if __name__ == "__main__":  # pragma: no cover - the regeneration command
    sys.stdout.write(spec_reference_markdown())
