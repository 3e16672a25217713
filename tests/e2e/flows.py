"""Writing throwaway flows for the end-to-end tests."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from flowproof_cli import trace as traces
from flowproof_cli.cassette import Turn
from tests.conftest import CliResult, run_cli
from tests.fakes.fake_upstream import FakeUpstream, Script

AGENTS = Path(__file__).resolve().parent / "agents"
TOOL_LOOP_AGENT = AGENTS / "tool_loop_agent.py"

DEFAULT_TOOLS: list[dict[str, Any]] = [
    {"name": "get_time", "result": {"now": "2026-01-01T09:00:00Z"}},
    {"name": "get_weather"},
]
DEFAULT_STEPS: list[dict[str, Any]] = [
    {"prompt": "What's the weather in Nairobi right now? Use both tools."},
    {"assert_tool_call": "get_weather where city equals Nairobi"},
    {"assert_tool_call": "get_time"},
    {"assert": "reply contains sunny"},
]


def agent_command(script: Path = TOOL_LOOP_AGENT) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def write_flow(
    folder: Path,
    *,
    name: str = "weather",
    steps: list[dict[str, Any]] | None = None,
    tools: list[dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
    command: str | None = None,
    **extra: Any,
) -> Path:
    """Write `<name>.flow.yaml` into folder and return its path."""
    spec: dict[str, Any] = {
        "name": f"{name} flow",
        "app": "agent",
        "agent": {"command": command or agent_command(), "env": env or {}},
        "tools": DEFAULT_TOOLS if tools is None else tools,
        "steps": DEFAULT_STEPS if steps is None else steps,
        **extra,
    }
    path = folder / f"{name}.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def traced_flow(folder: Path, trace: Path | None, name: str = "weather", **kwargs: Any) -> Path:
    """A flow whose requests match the recorded `trace`, with the trace copied beside it
    (None: a flow with no trace)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = write_flow(folder, name=name, **kwargs)
    if trace is not None:
        shutil.copy(trace, folder / f"{name}.trace.yaml")
    return spec


def set_agent_env(spec_path: Path, **variables: str) -> None:
    """Change the agent's environment in an existing flow (what a code change would do)."""
    spec = yaml.safe_load(spec_path.read_text())
    spec["agent"]["env"].update(variables)
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))


def trace_path(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml"))


def record_on_fake(
    spec: Path, key: str, version: str = "", script: Script | None = None
) -> tuple[FakeUpstream, CliResult]:
    """Record `spec` against a fresh fake upstream (`version`: the base URL's path, `/v1`
    for SDKs that add none; `script`: its answers) with `key` as flowproof's key; the
    stopped fake and the result."""
    with FakeUpstream(script=script) as fake:
        env = {"FLOWPROOF_AGENT_UPSTREAM": fake.base_url + version, "FLOWPROOF_AGENT_KEY": key}
        result = run_cli("record", spec, env=env)
    return fake, result


def recorded_on_fake(
    spec: Path, key: str, version: str = "", script: Script | None = None
) -> FakeUpstream:
    """`record_on_fake`, which must pass."""
    fake, result = record_on_fake(spec, key, version, script)
    assert result.code == 0, result.output
    return fake


def copy_recording(recording: Path, folder: Path, name: str = "weather") -> Path:
    """A copy of the recorded flow and its trace in `folder`, to edit and replay."""
    for file in (f"{name}.flow.yaml", f"{name}.trace.yaml"):
        shutil.copy(recording / file, folder / file)
    return folder / f"{name}.flow.yaml"


def _rewrite(value: Any, edit: Callable[[Any], Any]) -> Any:
    value = edit(value)
    if isinstance(value, dict):
        return {key: _rewrite(item, edit) for key, item in value.items()}
    if isinstance(value, list):
        return [_rewrite(item, edit) for item in value]
    return value


def edit_trace(
    spec: Path,
    *,
    requests: Callable[[Any], Any] | None = None,
    first_response: Callable[[Any], Any] | None = None,
    protocol: str | None = None,
) -> None:
    """Rewrite the recorded trace: `requests` on every value of every request,
    `first_response` on the first turn's response, `protocol` for every turn."""
    path = trace_path(spec)
    trace = traces.load(path)
    turns = []
    for position, turn in enumerate(trace.turns):
        request = _rewrite(turn.request, requests) if requests else turn.request
        response = turn.response
        if first_response and position == 0:
            response = _rewrite(turn.response, first_response)
        turns.append(Turn(protocol or turn.protocol, request, turn.status, response))
    trace.turns = turns
    traces.save(path, trace)


def replays_with_env(spec: Path, **variables: str) -> None:
    """The recorded flow, its agent's environment changed (`set_agent_env`), still passes."""
    set_agent_env(spec, **variables)
    result = run_cli("run", spec)
    assert result.code == 0, result.output


def replay_fails(spec: Path, *said: str, stream: str = "stdout") -> CliResult:
    """The replay of `spec` fails (exit 1), its `stream` (stdout, or `output`: both) saying
    each of `said`; the result."""
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    for fragment in said:
        assert fragment in getattr(result, stream), result.output
    return result


def changed_system_prompt_fails(spec: Path, prompt: str) -> CliResult:
    """The recording's system prompt `prompt` edited: the replay fails at turn 1, naming the
    recorded text. The result, for what a dialect also says."""
    edit_trace(spec, requests=lambda v: "You were a weather assistant." if v == prompt else v)
    return replay_fails(
        spec,
        "divergence at turn 1: message 0 (system) content changed",
        "recorded: You were a weather assistant.",
    )
