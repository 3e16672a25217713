"""A long system prompt edited at its end: the failure shows the edit, `--json` both values whole.

Recorded against the fake model with the real tool-loop agent, replayed offline after the
edit (what a prompt change in the agent's code does).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flowproof_cli.verdict import Failure
from tests.conftest import run_cli
from tests.e2e.flows import recorded_on_fake, set_agent_env, write_flow

pytestmark = pytest.mark.slow

SYSTEM = (
    "You are a weather assistant. "
    + "Answer with the forecast the tools return. " * 20
    + "Today's date is 2026-11-30. Be brief."
)  # 926 characters; "brief" starts at 920
EDITED = SYSTEM.replace("Be brief.", "Be terse.")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One recording for the module; each test edits its own copy."""
    folder = tmp_path_factory.mktemp("recorded")
    spec = write_flow(folder, env={"AGENT_SYSTEM": SYSTEM})
    recorded_on_fake(spec, "sk-1", "/v1")
    return folder


@pytest.fixture
def recorded(recording: Path, tmp_path: Path) -> Path:
    copy = shutil.copytree(recording, tmp_path / "flows")
    return copy / "weather.flow.yaml"


def test_unchanged_long_prompt_replays(recorded: Path) -> None:
    result = run_cli("run", recorded, "--json")
    assert result.code == 0, result.output
    flow = json.loads(result.stdout)["flows"][0]
    assert flow["status"] == "passed"
    assert flow["divergence"] is None


def test_edit_at_the_end_of_a_long_prompt_is_shown(recorded: Path) -> None:
    set_agent_env(recorded, AGENT_SYSTEM=EDITED)
    result = run_cli("run", recorded)
    assert result.code == 1, result.output
    assert result.stdout.splitlines()[:4] == [
        "FAIL: weather flow - divergence at turn 1: message 0 (system) content changed",
        "      differs at char 920 of 926",
        """      recorded: ..." Today's date is 2026-11-30. Be brief.\"""",
        """      replayed: ..." Today's date is 2026-11-30. Be terse.\"""",
    ]


def test_json_carries_the_full_recorded_and_replayed_values(recorded: Path) -> None:
    set_agent_env(recorded, AGENT_SYSTEM=EDITED)
    result = run_cli("run", recorded, "--json")
    assert result.code == 1, result.output
    payload = json.loads(result.stdout)
    assert payload["exit_code"] == 1
    flow = payload["flows"][0]
    assert flow["status"] == "failed"
    assert Failure.from_json(flow["failures"][0]).text.startswith(
        "divergence at turn 1: message 0 (system) content changed\n  differs at char 920 of 926"
    )
    divergence = flow["divergence"]
    assert divergence["turn"] == 1
    assert divergence["summary"] == "turn 1: message 0 (system) content changed"
    assert divergence["details"][0] == "differs at char 920 of 926"
    assert divergence["changes"] == [
        {"path": "messages.0.content", "kind": "changed", "recorded": SYSTEM, "replayed": EDITED}
    ]


def test_all_changes_shows_every_changed_field(recorded: Path) -> None:
    # Three things moved: the model (the coarsest, named first), the prompt and a schema.
    set_agent_env(recorded, AGENT_SYSTEM=EDITED, AGENT_MODEL="gpt-4o", AGENT_CITY_TYPE="integer")
    plain = run_cli("run", recorded)
    assert plain.code == 1, plain.output
    assert plain.stdout.splitlines()[0] == (
        "FAIL: weather flow - divergence at turn 1: model changed: recorded gpt-4o-mini, "
        "replayed gpt-4o"
    )
    assert "every changed field" not in plain.stdout
    assert "messages.0.content" not in plain.stdout

    every = run_cli("run", recorded, "--all-changes")
    assert every.code == 1, every.output
    lines = every.stdout.splitlines()
    start = lines.index("      every changed field of the request (3):")
    assert lines[start + 1 : start + 4] == [
        "        messages.0.content: differs at char 920 of 926: recorded ...\" Today's date "
        'is 2026-11-30. Be brief.", replayed ..." Today\'s date is 2026-11-30. Be terse."',
        "        model: recorded gpt-4o-mini, replayed gpt-4o",
        "        tools.0.function.parameters.properties.city.type: recorded string, replayed "
        "integer",
    ]
