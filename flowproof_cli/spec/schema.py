"""JSON Schema of `*.flow.yaml`, for editors and `flowproof schema`.

Generated from the pydantic models so it cannot drift from what the loader accepts. The
prose steps are strings with a `pattern`; the grammar itself is checked only by the loader.
"""

from __future__ import annotations

from typing import Any

from flowproof_cli.spec.models import FlowSpec


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a flow spec."""
    schema = FlowSpec.model_json_schema(by_alias=True, mode="validation")
    # `result: null` is a mock returning null; a schema default of null would claim otherwise.
    schema["$defs"]["ToolSpec"]["properties"]["result"].pop("default", None)
    return schema
