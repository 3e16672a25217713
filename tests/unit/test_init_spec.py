"""The starter spec `flowproof init` writes loads with the spec loader, whatever it found, and
names the schema file init writes beside it on its first line, for editors."""

from __future__ import annotations

import json
from pathlib import Path
from unittest.mock import MagicMock

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from flowproof_cli.cli.init import schema_beside
from flowproof_cli.cli.schema import schema
from flowproof_cli.doctor.starter import PROMPT_PLACEHOLDER, Probe, default_spec_name, starter_spec
from flowproof_cli.errors import SpecError
from flowproof_cli.spec.loader import load_spec, parse_spec
from flowproof_cli.spec.schema import MODELINE, SCHEMA_FILE


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("python weather_agent.py", "weather_agent.flow.yaml"),
        ("node agents/bot.mjs --fast", "bot.flow.yaml"),
        ("claude -p 'do it'", "claude.flow.yaml"),
        ("", "agent.flow.yaml"),
        ("python 'unterminated", "python.flow.yaml"),
    ],
)
def test_default_name_follows_the_script(command: str, name: str) -> None:
    assert default_spec_name(command) == name


@pytest.mark.parametrize("tools", [[], ["get_weather"], ["a tool: odd", 'quo"te', "x"]])
def test_the_starter_spec_loads(tmp_path: Path, tools: list[str]) -> None:
    found = Probe(MagicMock(), tools, ["anthropic"])
    path = tmp_path / "x.flow.yaml"
    command = "python 'my agent.py' --flag \"${HOME}\""
    path.write_text(starter_spec(command, found, path.name))
    spec = load_spec(path)
    assert spec.agent.command == command
    assert [tool.name for tool in spec.tools] == tools
    assert not spec.mocks
    assert spec.steps[0].prompt == PROMPT_PLACEHOLDER  # type: ignore[union-attr]
    assert "FLOWPROOF_AGENT_UPSTREAM=https://api.anthropic.com" in path.read_text()


def test_an_edited_starter_spec_still_reports_bad_keys(tmp_path: Path) -> None:
    text = starter_spec("python a.py", Probe(MagicMock(), ["t"], []), "a.flow.yaml")
    with pytest.raises(SpecError, match=r"a\.flow\.yaml:"):
        parse_spec(text.replace("app: agent", "ap: agent"), "a.flow.yaml")


# -- the schema modeline: editors validate the new spec ---------------------------------------------


def test_the_starter_spec_names_the_schema_on_its_first_line() -> None:
    text = starter_spec("python a.py", Probe(MagicMock(), [], []), "a.flow.yaml")
    assert text.splitlines()[0] == "# yaml-language-server: $schema=flow.schema.json"
    assert text.splitlines()[0] == MODELINE and MODELINE.endswith(f"$schema={SCHEMA_FILE}")


def test_init_writes_the_schema_its_modeline_names_beside_the_spec(tmp_path: Path) -> None:
    spec_path = tmp_path / "a.flow.yaml"
    spec_path.write_text(starter_spec("python a.py", Probe(MagicMock(), ["t"], []), "a.flow.yaml"))
    said = schema_beside(spec_path)
    written = tmp_path / SCHEMA_FILE
    assert said == f"wrote {written}: the schema its first line names, for editors"
    printed = CliRunner().invoke(schema, [])
    assert written.read_text(encoding="utf-8") == printed.output  # what `flowproof schema` prints
    validator = jsonschema.Draft202012Validator(json.loads(written.read_text()))
    assert list(validator.iter_errors(yaml.safe_load(spec_path.read_text()))) == []
    assert schema_beside(spec_path) == f"{written}, the schema its first line names, is current"


def test_a_schema_file_of_the_project_is_never_replaced(tmp_path: Path) -> None:
    theirs = tmp_path / SCHEMA_FILE
    theirs.write_text("{}\n")
    said = schema_beside(tmp_path / "a.flow.yaml")
    assert said == (
        f"note: left {theirs} as it is: it is not this flowproof's schema. Refresh: "
        f"flowproof schema > {theirs}"
    )
    assert theirs.read_text() == "{}\n"


def test_a_schema_that_cannot_be_written_is_a_warning(tmp_path: Path) -> None:
    said = schema_beside(tmp_path / "gone" / "a.flow.yaml")
    assert said.startswith(f"warning: could not write {tmp_path / 'gone' / SCHEMA_FILE} (")
    assert said.endswith(f"until `flowproof schema > {tmp_path / 'gone' / SCHEMA_FILE}`")
