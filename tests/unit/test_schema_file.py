"""specs/flow.schema.json, the file editors point at, is exactly what `flowproof schema` prints.

It is committed so that an editor validates a flow without running flowproof; a spec-model
change that is not regenerated would make editors accept or flag the wrong keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from flowproof_cli.cli.schema import schema
from tests.conftest import REPO

SCHEMA_FILE = REPO / "specs" / "flow.schema.json"
REGENERATE = ".venv/bin/flowproof schema > specs/flow.schema.json"
FLOWS = sorted((REPO / "specs").glob("*.flow.yaml"))


def printed_schema() -> str:
    result = CliRunner().invoke(schema, [])
    assert result.exit_code == 0, result.output
    return result.output


def stale_reason(committed: Path, printed: str) -> str | None:
    """Why `committed` is not the printed schema (naming the command that fixes it), or None."""
    if not committed.is_file():
        return f"{committed.name} is missing; regenerate it: {REGENERATE}"
    if committed.read_text(encoding="utf-8") != printed:
        return f"{committed.name} differs from `flowproof schema`; regenerate it: {REGENERATE}"
    return None


def test_the_committed_schema_is_what_flowproof_schema_prints() -> None:
    reason = stale_reason(SCHEMA_FILE, printed_schema())
    assert reason is None, reason


def test_a_stale_schema_file_names_the_command_that_regenerates_it(tmp_path: Path) -> None:
    stale = tmp_path / "flow.schema.json"
    schema_data = json.loads(printed_schema())
    del schema_data["properties"]["steps"]
    stale.write_text(json.dumps(schema_data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    assert stale_reason(stale, printed_schema()) == (
        "flow.schema.json differs from `flowproof schema`; regenerate it: "
        ".venv/bin/flowproof schema > specs/flow.schema.json"
    )
    assert stale_reason(tmp_path / "absent.json", printed_schema()) == (
        "absent.json is missing; regenerate it: .venv/bin/flowproof schema > specs/flow.schema.json"
    )


@pytest.mark.parametrize("flow", FLOWS, ids=[flow.name for flow in FLOWS])
def test_every_flow_of_the_suite_is_valid_under_the_schema_file(flow: Path) -> None:
    jsonschema.validate(yaml.safe_load(flow.read_text()), json.loads(SCHEMA_FILE.read_text()))


def test_the_schema_file_rejects_a_misspelt_key() -> None:
    flow = yaml.safe_load((REPO / "specs" / "chat.flow.yaml").read_text())
    flow["stpes"] = flow.pop("steps")
    with pytest.raises(jsonschema.ValidationError, match="'stpes' was unexpected"):
        jsonschema.validate(flow, json.loads(SCHEMA_FILE.read_text()))


def test_the_suite_holds_a_flow_per_dialect_and_boundary() -> None:
    """specs/README.md promises these flows; a deleted one would drop its guard silently."""
    assert [flow.name.removesuffix(".flow.yaml") for flow in FLOWS] == [
        "anthropic",
        "chat",
        "contained",
        "gemini",
        "guard",
        "mcp",
        "responses",
    ]
    for flow in FLOWS:
        assert flow.with_name(flow.name.replace(".flow.", ".trace.")).is_file(), flow.name
