"""docs/reference/spec.md is exactly what the models generate, so the reference cannot drift."""

from __future__ import annotations

import pytest

from flowproof_cli.spec import reference
from flowproof_cli.spec.reference import REGENERATE, spec_reference_markdown
from flowproof_cli.spec.schema import spec_json_schema
from tests.conftest import REPO

PAGE = REPO / "docs" / "reference" / "spec.md"


def test_the_committed_reference_is_what_the_models_generate() -> None:
    assert PAGE.is_file(), f"{PAGE.name} is missing; regenerate it: {REGENERATE}"
    assert PAGE.read_text(encoding="utf-8") == spec_reference_markdown(), (
        f"docs/reference/spec.md differs from the models; regenerate it: {REGENERATE}"
    )


def test_every_mapping_and_key_of_the_schema_has_its_row() -> None:
    page = spec_reference_markdown()
    schema = spec_json_schema()
    for name, definition in schema["$defs"].items():
        assert f"## `{name}`" in page
        for key in definition.get("properties", {}):
            assert f"| `{key}` |" in page, (name, key)
    assert "| `results` | list of any JSON value (at least 1) | no |" in page
    assert "Not together: `result`, `results`." in page
    assert "Exactly one of `name` or `call`." in page
    assert "| `times` | whole number >= 1 | no |" in page


def test_a_changed_description_changes_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = spec_json_schema()
    schema["$defs"]["ToolSpec"]["properties"]["results"]["description"] = "CHANGED"
    monkeypatch.setattr(reference, "spec_json_schema", lambda: schema)
    assert "| `results` | list of any JSON value (at least 1) | no | CHANGED |" in (
        reference.spec_reference_markdown()
    )
    assert PAGE.read_text(encoding="utf-8") != reference.spec_reference_markdown()
