"""Writing throwaway flows for the end-to-end tests."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

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


def set_agent_env(spec_path: Path, **variables: str) -> None:
    """Change the agent's environment in an existing flow (what a code change would do)."""
    spec = yaml.safe_load(spec_path.read_text())
    spec["agent"]["env"].update(variables)
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
