"""JSON mode for `flowproof doctor`'s canned replies: what a request asks for, and an answer.

A client that asks for JSON (a router, a classifier, a structured-output call) parses the
reply, and a plain sentence makes it retry or fall back slowly (Gemini CLI's router call
took a doctor run to 104 s). So a request in JSON mode gets JSON text, and one with a schema
gets a small instance of it: every property filled with a placeholder of its type, the first
`enum` value, `const` as written. Anthropic's Messages API has no JSON mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

JSON = dict[str, Any]
PLAIN_JSON_ANSWER_KEY = "reply"  # JSON mode without a schema: {"reply": <canned text>}
_MAX_DEPTH = 8  # nested schemas deeper than this (recursive `$ref`s) get only what is required
_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "email": "doctor@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


@dataclass(frozen=True)
class JsonMode:
    """A request asks for JSON text; `schema` is the JSON Schema it must satisfy, if any."""

    schema: JSON | None = None


def json_mode(dialect: str, body: JSON) -> JsonMode | None:
    """The JSON mode `body` (a raw request of `dialect`) asks for, or None for plain text."""
    if dialect in ("openai-chat", "azure-chat"):
        return _openai_format(body.get("response_format"), nested="json_schema")
    if dialect in ("openai-responses", "azure-responses"):
        text = body.get("text")
        return _openai_format(text.get("format") if isinstance(text, dict) else None, nested=None)
    if dialect in ("gemini", "vertex-gemini"):
        return _gemini_mode(body)
    return None


def _openai_format(fmt: Any, *, nested: str | None) -> JsonMode | None:
    """Chat `response_format` (schema under `json_schema.schema`) or Responses `text.format`
    (schema under `schema`): `json_object` or `json_schema` mean JSON."""
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_object":
        return JsonMode()
    if fmt.get("type") != "json_schema":
        return None
    holder = fmt.get(nested) if nested is not None else fmt
    schema = holder.get("schema") if isinstance(holder, dict) else None
    return JsonMode(schema if isinstance(schema, dict) else None)


def _gemini_mode(body: JSON) -> JsonMode | None:
    """`generationConfig` (or snake_case `generation_config`): a JSON mime type, or a schema
    in `responseJsonSchema` (JSON Schema) or `responseSchema` (Gemini's OpenAPI subset)."""
    config = body.get("generationConfig", body.get("generation_config"))
    if not isinstance(config, dict):
        return None

    def field(camel: str, snake: str) -> Any:
        return config.get(camel, config.get(snake))

    for schema in (
        field("responseJsonSchema", "response_json_schema"),
        field("responseSchema", "response_schema"),
    ):
        if isinstance(schema, dict):
            return JsonMode(schema)
    if field("responseMimeType", "response_mime_type") == "application/json":
        return JsonMode()
    return None


def json_answer(mode: JsonMode, text: str) -> Any:
    """The value to answer with: `{"reply": text}`, or an instance of the schema."""
    if mode.schema is None:
        return {PLAIN_JSON_ANSWER_KEY: text}
    return _Instance(mode.schema, text).of(mode.schema, depth=0)


class _Instance:
    """Builds a value satisfying a schema; `root` resolves local `$ref`s (`#/$defs/X`)."""

    def __init__(self, root: JSON, text: str) -> None:
        self.root = root
        self.text = text

    def of(self, schema: Any, *, depth: int) -> Any:
        if not isinstance(schema, dict) or depth > 2 * _MAX_DEPTH:
            return self.text  # `true`, a malformed schema, or one that never bottoms out
        schema = self._resolved(schema)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                return self.of(_without_null(branches)[0], depth=depth)
        if isinstance(schema.get("allOf"), list):
            return self.of(self._merged(schema), depth=depth)
        kind = _kind(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        if kind in ("integer", "number"):
            return _number(schema, integer=kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return self._string(schema)

    def _resolved(self, schema: JSON) -> JSON:
        seen = 0
        while isinstance(schema.get("$ref"), str) and seen < _MAX_DEPTH:
            target: Any = self.root
            for part in schema["$ref"].removeprefix("#").strip("/").split("/"):
                key = part.replace("~1", "/").replace("~0", "~")
                if key:
                    target = target.get(key) if isinstance(target, dict) else None
            if not isinstance(target, dict):
                return {}
            schema, seen = target, seen + 1
        return schema

    def _merged(self, schema: JSON) -> JSON:
        """`allOf` folded into one schema: properties and `required` unioned, rest overlaid."""
        merged: JSON = {key: value for key, value in schema.items() if key != "allOf"}
        for part in schema["allOf"]:
            if not isinstance(part, dict):
                continue
            for key, value in self._resolved(part).items():
                if key == "properties" and isinstance(value, dict):
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required" and isinstance(value, list):
                    merged["required"] = [*merged.get("required", []), *value]
                else:
                    merged.setdefault(key, value)
        return merged

    def _object(self, schema: JSON, depth: int) -> JSON:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = [name for name in schema.get("required") or [] if isinstance(name, str)]
        names = [*required, *(n for n in properties if n not in required)]
        if depth >= _MAX_DEPTH:
            names = required
        return {name: self.of(properties.get(name, {}), depth=depth + 1) for name in names}

    def _array(self, schema: JSON, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        values = [self.of(item, depth=depth + 1) for item in prefix]
        minimum = schema.get("minItems")
        count = minimum if isinstance(minimum, int) and not isinstance(minimum, bool) else 0
        items = schema.get("items", {})
        values += [self.of(items, depth=depth + 1) for _ in range(max(0, count - len(values)))]
        return values

    def _string(self, schema: JSON) -> str:
        value = _FORMATS.get(str(schema.get("format")), self.text)
        longest, shortest = schema.get("maxLength"), schema.get("minLength")
        if isinstance(longest, int):
            value = value[: max(longest, 0)]
        if isinstance(shortest, int) and len(value) < shortest:
            value = value.ljust(shortest, ".")
        return value


def _kind(schema: JSON) -> str:
    """The JSON type to build; Gemini's OpenAPI subset writes it upper-case (`OBJECT`)."""
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if str(t).lower() != "null"), "null")
    if isinstance(declared, str):
        return declared.lower()
    if "properties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return "string"


def _without_null(branches: list[Any]) -> list[Any]:
    """The branches that are not the `null` type, so `Optional[X]` answers with an X."""
    kept = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
    return kept or branches


def _number(schema: JSON, *, integer: bool) -> int | float:
    """0, or the smallest allowed value when a minimum rules 0 out."""
    value: float = 0
    low, above, high = (schema.get(k) for k in ("minimum", "exclusiveMinimum", "maximum"))
    if _is_number(low) and value < low:
        value = low
    if _is_number(above) and value <= above:
        value = above + 1 if integer else above + 0.5
    if _is_number(high) and value > high:
        value = high
    if integer:
        return int(value) if float(value).is_integer() else int(value) + 1
    return value


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
