"""The starter spec `flowproof init` writes loads with the spec loader, whatever it found."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import MagicMock

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.runner.init import PROMPT_PLACEHOLDER, Probe, default_spec_name, starter_spec
from flowproof_cli.spec.loader import load_spec, parse_spec


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
