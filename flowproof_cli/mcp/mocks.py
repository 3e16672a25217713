"""Mocked MCP tools: a `tools/call` answered by flowproof, never forwarded to the server.

A spec's `result:` becomes a `CallToolResult`: a mapping that already looks like one (it
has a `content` list) is sent as written; anything else becomes one text block (a string
as is, other JSON as canonical JSON), plus `structuredContent` when it is a mapping, or
when the tool declares an `outputSchema` (clients validate it): a schema with a single
property (`result` is how SDKs wrap a plain return value) gets `{"<property>": <value>}`
unless the value is a mapping that already has it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flowproof_cli.canonical import canonical_json
from flowproof_cli.mcp.canonical import is_modern


def _single_property(schema: Any) -> str | None:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and len(properties) == 1:
        (name,) = properties
        return str(name)
    return None


def tool_result(value: Any, *, modern: bool, schema: Any = None) -> dict[str, Any]:
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        result = dict(value)
    else:
        text = value if isinstance(value, str) else canonical_json(value)
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        structured = value if isinstance(value, dict) else None
        wrapper = _single_property(schema)
        if wrapper is not None and not (isinstance(value, dict) and wrapper in value):
            structured = {wrapper: value}
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


def mocked_tool(message: dict[str, Any], mocks: Mapping[str, Any]) -> str | None:
    """The tool name when `message` is a `tools/call` of a mocked tool."""
    if message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) and name in mocks else None


def mock_answer(
    message: dict[str, Any], mocks: Mapping[str, Any], schemas: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """`{"result": CallToolResult}` for a mocked call, else None."""
    name = mocked_tool(message, mocks)
    if name is None:
        return None
    schema = (schemas or {}).get(name)
    return {"result": tool_result(mocks[name], modern=is_modern(message), schema=schema)}
