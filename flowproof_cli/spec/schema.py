"""JSON Schema of `*.flow.yaml`, for editors and `flowproof schema`.

Generated from the pydantic models so it cannot drift from what the loader accepts. The
prose steps are strings with a `pattern`; the grammar itself is checked only by the loader.
"""

from __future__ import annotations

import json
from typing import Any

from flowproof_cli.spec.models import FlowSpec

#: The schema's file name where a project keeps it beside its flows (`flowproof init`
#: writes it there), and the first line of a spec that points an editor at it: the YAML
#: language server resolves the path against the spec's own folder.
SCHEMA_FILE = "flow.schema.json"
MODELINE = f"# yaml-language-server: $schema={SCHEMA_FILE}"


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a flow spec."""
    schema = FlowSpec.model_json_schema(by_alias=True, mode="validation")
    # `result: null` is a mock returning null; a schema default of null would claim otherwise.
    schema["$defs"]["ToolSpec"]["properties"]["result"].pop("default", None)
    return schema


def schema_text() -> str:
    """The schema as `flowproof schema` prints it, and as a schema file holds it."""
    return json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"
