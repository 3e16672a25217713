"""`flowproof init --agent CMD`: a real agent, run once against canned replies, becomes a spec
that loads; an existing file is never replaced; an agent that calls no model gets the hint."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from flowproof_cli.spec.loader import load_spec
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.slow

PY = shlex.quote(sys.executable)
WEATHER = REPO / "examples" / "agent-demo" / "weather_agent.py"
ANTHROPIC = REPO / "tests" / "e2e" / "agents" / "py_anthropic.py"


def test_init_writes_a_spec_that_loads_with_the_offered_tools(tmp_path: Path) -> None:
    command = f"{PY} {shlex.quote(str(WEATHER))}"
    result = run_cli("init", "--agent", command, cwd=tmp_path)
    assert result.code == 0, result.output
    written = tmp_path / "weather_agent.flow.yaml"
    assert f"wrote {written.name}: 1 model request(s)" in result.stdout
    spec = load_spec(written)
    assert spec.agent.command == command
    assert [tool.name for tool in spec.tools] == ["get_weather", "get_time", "delete_city"]
    assert not spec.mocks  # declared, not mocked
    assert "FLOWPROOF_AGENT_UPSTREAM=https://api.openai.com/v1" in written.read_text()
    schema = tmp_path / "flow.schema.json"  # the file the spec's first line names, for editors
    assert written.read_text().startswith("# yaml-language-server: $schema=flow.schema.json\n")
    assert f"wrote {schema.name}: the schema its first line names, for editors" in result.stdout
    assert schema.read_text() == run_cli("schema").stdout


def test_init_names_the_anthropic_upstream_and_honours_out(tmp_path: Path) -> None:
    out = tmp_path / "claude.flow.yaml"
    result = run_cli("init", "--agent", f"{PY} {ANTHROPIC}", "--out", out)
    assert result.code == 0, result.output
    assert "FLOWPROOF_AGENT_UPSTREAM=https://api.anthropic.com " in out.read_text()
    assert load_spec(out).tools


def test_init_refuses_to_replace_a_file(tmp_path: Path) -> None:
    out = tmp_path / "mine.flow.yaml"
    out.write_text("my own work\n")
    result = run_cli("init", "--agent", f"{PY} {WEATHER}", "--out", out)
    assert result.code == 2
    assert f"error: {out} already exists; init never replaces a spec. Fix: pass another" in (
        result.stderr
    )
    assert out.read_text() == "my own work\n"


def test_an_agent_without_model_calls_gets_the_wiring_hint(tmp_path: Path) -> None:
    out = tmp_path / "quiet.flow.yaml"
    result = run_cli("init", "--agent", f"{PY} -c pass", "--out", out)
    assert result.code == 1
    assert "FAIL: no model request reached flowproof's proxy" in result.stdout
    assert 'MY_LLM_BASE_URL: "${flowproof.proxy_url}"' in result.stdout
    assert "no spec written: fix the wiring above, then run init again" in result.stderr
    assert not out.exists()


def test_an_agent_that_cannot_start_is_an_error(tmp_path: Path) -> None:
    result = run_cli("init", "--agent", "no-such-agent-binary", "--out", tmp_path / "x.flow.yaml")
    assert result.code == 2
    assert "no-such-agent-binary" in result.stderr
    assert "Traceback" not in result.output


def test_an_out_in_a_missing_folder_names_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "x.flow.yaml"
    result = run_cli("init", "--agent", f"{PY} {WEATHER}", "--out", out)
    assert result.code == 2
    assert f"error: {out.parent} is not a directory (the agent runs in the spec's directory). " in (
        result.stderr
    )
    assert not out.parent.exists()
