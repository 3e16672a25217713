"""Mocked MCP tools: a `tools/call` answered by flowproof, never forwarded to the server.

A spec's `result:` becomes a `CallToolResult` (with `results:`, the k-th value answers the
k-th call of the tool; a call beyond the list is refused and fails the flow). A mapping that
already looks like one (a `content` list or a `structuredContent`) is sent as written, with
one text block added when it has no `content`. Anything else becomes one text block (a
string as is, other JSON as canonical JSON), plus `structuredContent` when it is a mapping.

When the real server's `tools/list` declares an `outputSchema` for the tool, the MCP spec
requires `structuredContent` conforming to it, and SDK clients enforce that (the Python SDK
dies with "Invalid structured content returned by tool ..."). So the structured content is
chosen to conform, and checked with `jsonschema` before anything is sent: the mapping itself
when the schema accepts it, else `{"<property>": <value>}` for a single-property schema
(how SDKs wrap a plain return value: `result`; server-filesystem: `content`). A mock the
schema accepts in neither form raises `MockSchemaError`, naming the schema path that failed
and the fix. An `isError` result is not checked (clients skip it too), nor is a schema that
is not valid JSON Schema (the client cannot use it either).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flowproof_cli.canonical import canonical_json
from flowproof_cli.dialects.base import ResultSequence, ResultsExhausted
from flowproof_cli.mcp.canonical import is_modern
from flowproof_cli.mcp.lane import Lane

#: The JSON-RPC error code of a mocked call flowproof refused (as for a divergence).
MOCK_REFUSED_CODE = -32099
_MESSAGE_LIMIT = 160  # characters of a jsonschema message (it quotes the whole instance)


class MockSchemaError(ValueError):
    """A `result:` mock that its tool's declared `outputSchema` rejects in every form."""

    def __init__(self, tool: str, path: str, reason: str, fix: str):
        self.tool, self.path, self.reason, self.fix = tool, path, reason, fix
        super().__init__(
            f"the `result:` mock of `{tool}` does not satisfy the tool's outputSchema "
            f"({path}: {reason}). Fix: {fix}, or mock the result as {{structuredContent: ...}} "
            "that the schema accepts"
        )


#: What a mocked call may be refused with (the flow fails; the agent gets a JSON-RPC error).
MOCK_REFUSALS = (MockSchemaError, ResultsExhausted)
MockRefusal = MockSchemaError | ResultsExhausted


def _single_property(schema: Any) -> str | None:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and len(properties) == 1:
        (name,) = properties
        return str(name)
    return None


def _text_block(value: Any) -> dict[str, Any]:
    return {"type": "text", "text": value if isinstance(value, str) else canonical_json(value)}


# -- the schema check -----------------------------------------------------------------------


def _validator(schema: Any) -> Any:
    """A validator for `schema`, or None when it is not usable JSON Schema.

    jsonschema is imported here, not at module level: the stdio stand-in starts on every
    agent launch and most mocks meet no schema. The empty registry keeps `$ref` inside the
    schema document (nothing is ever fetched), as the Python SDK client does.
    """
    if not isinstance(schema, dict):
        return None
    from jsonschema import SchemaError  # noqa: PLC0415
    from jsonschema.validators import validator_for  # noqa: PLC0415
    from referencing import Registry  # noqa: PLC0415

    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    return cls(schema, registry=Registry())


def _violation(validator: Any, instance: Any) -> tuple[str, str] | None:
    """(schema path, reason) of the error a client reports for `instance`, or None."""
    from jsonschema.exceptions import best_match  # noqa: PLC0415
    from referencing.exceptions import Unresolvable  # noqa: PLC0415

    try:
        error = best_match(validator.iter_errors(instance))
    except Unresolvable:
        return None  # a `$ref` outside the document: the client cannot check it either
    if error is None:
        return None
    path = "".join(f".{part}" for part in error.schema_path)
    reason = error.message
    if len(reason) > _MESSAGE_LIMIT:
        reason = reason[: _MESSAGE_LIMIT - 3] + "..."
    return f"outputSchema{path}", reason


def _type_name(spec: Any) -> str:
    kind = spec.get("type") if isinstance(spec, dict) else None
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind) if kind else "value"


def _fix(schema: dict[str, Any]) -> str:
    """What the mock should hold, read off the schema's properties."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    wrapper = _single_property(schema)
    if wrapper is not None:
        kind = _type_name(properties[wrapper])
        article = "an" if kind[:1] in "aeiou" else "a"
        return f"give the mock {article} `{wrapper}` {kind}, make the mock itself {article} {kind}"
    required = schema.get("required")
    names = [str(n) for n in required] if isinstance(required, list) else []
    if names:
        listed = ", ".join(f"`{n}` ({_type_name(properties.get(n))})" for n in names)
        return f"give the mock the properties {listed}"
    return "give the mock a value the schema accepts"


def _structured(tool: str, value: Any, schema: Any, validator: Any) -> tuple[Any, Any]:
    """(structuredContent or None, text-block value) for a mock that is not a result."""
    mapping = isinstance(value, dict)
    if validator is None:
        return (value if mapping else None), value
    candidates: list[Any] = [value] if mapping else []
    wrapper = _single_property(schema)
    if wrapper is not None and not (mapping and wrapper in value):
        candidates.append({wrapper: value})
    if not candidates:  # a plain value, and no single property to wrap it in
        plain = ("outputSchema", "a plain value, and structured content must be an object")
        raise MockSchemaError(tool, *(_violation(validator, value) or plain), _fix(schema))
    first: tuple[str, str] | None = None
    for structured in candidates:
        violation = _violation(validator, structured)
        if violation is None:
            return structured, value
        first = first or violation
    assert first is not None
    raise MockSchemaError(tool, *first, _fix(schema))


def _as_written(tool: str, value: dict[str, Any], schema: Any, validator: Any) -> dict[str, Any]:
    """A mock shaped like a CallToolResult; checked unless it is an error result."""
    result = dict(value)
    if not isinstance(result.get("content"), list):
        result["content"] = [_text_block(result["structuredContent"])]
        result.setdefault("isError", False)
    if validator is None or result.get("isError"):
        return result
    if "structuredContent" not in result:
        if _violation(validator, value) is None:  # e.g. read_media_file's {content: [...]}
            result["structuredContent"] = value
            return result
        raise MockSchemaError(
            tool,
            "outputSchema",
            "the result has a `content` list and no `structuredContent`",
            _fix(schema),
        )
    violation = _violation(validator, result["structuredContent"])
    if violation is not None:
        raise MockSchemaError(tool, *violation, _fix(schema))
    return result


# -- building the answer --------------------------------------------------------------------


def _is_call_result(value: Any) -> bool:
    return isinstance(value, dict) and (
        isinstance(value.get("content"), list) or "structuredContent" in value
    )


def tool_result(value: Any, *, modern: bool, schema: Any = None, tool: str = "") -> dict[str, Any]:
    """The CallToolResult for a mock; raises MockSchemaError when `schema` rejects it."""
    validator = _validator(schema) if schema is not None else None
    if _is_call_result(value):
        result = _as_written(tool, value, schema, validator)
    else:
        structured, text = _structured(tool, value, schema, validator)
        result = {"content": [_text_block(text)], "isError": False}
        if structured is not None:
            result["structuredContent"] = structured
    if modern:
        result.setdefault("resultType", "complete")
    return result


def output_schemas(results: Iterable[Any]) -> dict[str, Any]:
    """Tool name -> outputSchema, from `tools/list` results (later lists win)."""
    schemas: dict[str, Any] = {}
    for result in results:
        tools = result.get("tools") if isinstance(result, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                schemas[tool["name"]] = tool.get("outputSchema")
    return schemas


def lane_schemas(lane: Lane) -> dict[str, Any]:
    """Tool name -> outputSchema, from the `tools/list` answers a lane recorded."""
    return output_schemas(call.result for call in lane.calls if call.method == "tools/list")


def mocked_tool(message: dict[str, Any], mocks: Mapping[str, Any]) -> str | None:
    """The tool name when `message` is a `tools/call` of a mocked tool."""
    if message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) and name in mocks else None


def mock_answer(
    message: dict[str, Any],
    mocks: Mapping[str, Any],
    schemas: Mapping[str, Any] | None = None,
    counts: dict[str, int] | None = None,
) -> dict[str, Any] | None:
    """`{"result": CallToolResult}` for a mocked call, else None.

    A `results:` sequence answers the k-th `tools/call` of its tool with its k-th value;
    `counts` (tool name -> calls answered so far) is the caller's, one per server session.
    Raises MockSchemaError, or ResultsExhausted for a call beyond the list.
    """
    name = mocked_tool(message, mocks)
    if name is None:
        return None
    value = mocks[name]
    if isinstance(value, ResultSequence):
        seen = counts if counts is not None else {}
        index = seen.get(name, 0)
        seen[name] = index + 1
        if index >= len(value):
            raise ResultsExhausted(name, index + 1, len(value))
        value = value[index]
    schema = (schemas or {}).get(name)
    result = tool_result(value, modern=is_modern(message), schema=schema, tool=name)
    return {"result": result}


def refusal(server: str, error: MockRefusal) -> tuple[str, dict[str, Any]]:
    """(the flow's failure text, the JSON-RPC error answer) for a mock its schema rejects."""
    text = f"the MCP server '{server}': {error}"
    return text, {"error": {"code": MOCK_REFUSED_CODE, "message": f"flowproof: {text}"}}


def schema_problems(server: str, mocks: Mapping[str, Any], schemas: Mapping[str, Any]) -> list[str]:
    """Every mock of `server` that its tool's outputSchema rejects, as a failure text."""
    problems: list[str] = []
    for tool, mock in mocks.items():
        if schemas.get(tool) is None:
            continue
        for value in mock if isinstance(mock, ResultSequence) else [mock]:
            try:
                tool_result(value, modern=False, schema=schemas[tool], tool=tool)
            except MockSchemaError as exc:
                problems.append(refusal(server, exc)[0])
                break
    return problems
