"""`assert: output ...`, `exit code ...` and `model calls ...` end to end: a real agent (stdlib
HTTP) recorded against the fake model and replayed offline. It prints to stdout and stderr
and exits 1: with `exit code equals 1` the flow passes; each red path names expected and
actual, and without an `exit code` step the exit fails the flow as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, agent_command, recorded_on_fake, write_flow
from tests.fakes.fake_upstream import Reply, sequence

pytestmark = pytest.mark.slow

PROMPT = "Book me a flight to Nairobi"
STEPS: list[dict[str, Any]] = [
    {"prompt": PROMPT},
    {"assert": "reply contains booked"},
    {"assert": "output contains try again later"},  # stderr
    {"assert": "output contains agent: starting"},  # stdout's first line, 16 kB before its end
    {"assert": "output matches Nairobi is booked\\.\\s+agent: the booking"},  # stdout then stderr
    {"assert": "model calls equals 2"},
    {"assert": "model calls at least 2"},
    {"assert": "exit code equals 1"},
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The flow, recorded once (it passes at record too: the exit is the step's to judge)."""
    folder = tmp_path_factory.mktemp("run-assertions")
    spec = write_flow(
        folder,
        name="exits",
        command=agent_command(AGENTS / "py_exit_code.py"),
        env={"AGENT_EXIT": "1", "AGENT_CALLS": "2", "AGENT_NOISE": "400"},
        tools=[],
        steps=STEPS,
    )
    recorded_on_fake(spec, "sk-x", "/v1", sequence(Reply(text="Nairobi is booked.")))
    return spec


def with_steps(spec: Path, *changed: tuple[int, str | None]) -> Path:
    """The flow with step `index` rewritten (None: removed), beside the same trace."""
    document = yaml.safe_load(spec.read_text())
    steps = document["steps"]
    for index, text in changed:
        steps[index] = {"assert": text} if text is not None else None
    document["steps"] = [step for step in steps if step is not None]
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    return spec


def test_the_flow_passes_at_replay(recorded: Path) -> None:
    result = run_cli("run", recorded)
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS: exits flow"), result.output


def test_exit_code_equals_0_fails_naming_1(recorded: Path, tmp_path: Path) -> None:
    output = failed_run(recorded, tmp_path, (7, "exit code equals 0"))
    assert "assert exit code equals 0: the agent exited with code 1, expected 0" in output
    assert "try again later" in output  # the last lines it printed


def test_model_calls_red_path(recorded: Path, tmp_path: Path) -> None:
    output = failed_run(
        recorded, tmp_path, (5, "model calls equals 3"), (6, "model calls at most 1")
    )
    assert "the agent made 2 model call(s), expected exactly 3" in output
    assert "the agent made 2 model call(s), expected at most 1" in output


def test_output_red_path(recorded: Path, tmp_path: Path) -> None:
    output = failed_run(recorded, tmp_path, (2, "output contains all good"))
    assert 'the agent\'s output does not contain "all good"; its output ends with:' in output


def test_without_an_exit_code_step_the_exit_fails_the_flow(recorded: Path, tmp_path: Path) -> None:
    output = failed_run(recorded, tmp_path, (7, None))
    assert "the agent exited with code 1 after its model calls" in output


def failed_run(recorded: Path, folder: Path, *changed: tuple[int, str | None]) -> str:
    """`flowproof run` on a copy of the flow in `folder` with `changed` steps: it exits 1; its
    output."""
    spec = with_steps(copy(recorded, folder), *changed)
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    return result.output


def copy(spec: Path, folder: Path) -> Path:
    """The flow and its trace in a folder of the test's own."""
    for path in (spec, spec.with_name("exits.trace.yaml")):
        (folder / path.name).write_bytes(path.read_bytes())
    return folder / spec.name
