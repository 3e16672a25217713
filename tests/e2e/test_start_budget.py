"""What a replay imports before its agent starts, pinned by module (never by a time).

Everything `flowproof run SPEC` imports before it spawns the agent is waited for on every
flow; what only the verdict needs (`runner/verdict_phase.py`) is imported while the agent
runs instead, beside the agent's own start. A fresh interpreter runs the CLI with an audit
hook that takes sys.modules when the agent's process is created and again at exit (its
atexit handlers still run).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.errors import ConfigError
from flowproof_cli.mode import Mode
from flowproof_cli.runner import flow
from flowproof_cli.runner.flow import run_flow
from flowproof_cli.runner.run_proxy import RunProxy
from flowproof_cli.spec import load_spec
from flowproof_cli.trace import trace_path_for
from tests.conftest import clean_environ, run_command
from tests.e2e.flows import traced_flow

#: The verdict's module and what it alone imports.
VERDICT_MODULES = {
    "flowproof_cli.runner.verdict_phase",
    "flowproof_cli.runner.judge",
    "flowproof_cli.runner.turn_judge",
    "flowproof_cli.runner.tool_warnings",
    "flowproof_cli.runner.rerecord",
    "flowproof_cli.evidence.trajectory_diff",
}

_PROBE = """\
import atexit, json, runpy, sys
out, taken = sys.argv[1], {}
def hook(event, args):
    if event == "subprocess.Popen" and "spawned" not in taken:
        argv = " ".join(map(str, args[1] or ()))
        if "keeper.py" not in argv:
            taken["spawned"] = sorted(sys.modules)
def ended():
    taken["ended"] = sorted(sys.modules)
    with open(out, "w") as handle:
        json.dump(taken, handle)
sys.addaudithook(hook)
atexit.register(ended)  # the CLI ends with os._exit, after the atexit handlers
sys.argv = ["flowproof", *sys.argv[2:]]
runpy.run_module("flowproof_cli", run_name="__main__")
"""


def test_the_verdict_modules_load_while_the_agent_runs_not_before(
    tmp_path: Path, recorded_trace: Path
) -> None:
    spec = traced_flow(tmp_path / "flow", recorded_trace)
    out = tmp_path / "modules.json"
    done = run_command([sys.executable, "-c", _PROBE, out, "run", spec])
    assert done.code == 0, done.output
    taken = json.loads(out.read_text())
    at_spawn, at_end = set(taken["spawned"]), set(taken["ended"])
    assert "flowproof_cli.runner.flow" in at_spawn  # the hook saw the agent's spawn
    assert not at_spawn & VERDICT_MODULES, "imported before the agent started"
    assert at_end >= VERDICT_MODULES


class _EngineBroke(RunProxy):
    """A run's proxy whose engine fails to start, a moment after the agent's spawn."""

    async def _start_engine(self) -> Any:
        await asyncio.sleep(0.2)
        raise ConfigError("the proxy engine did not start within 10 s")


def test_an_engine_that_does_not_start_fails_the_flow_with_its_own_error(
    tmp_path: Path, recorded_trace: Path
) -> None:
    """The verdict's load while the agent runs waits for the engine and drops its failure:
    the flow's own wait for the engine must still raise it, not run on to its timeout."""
    spec_path = traced_flow(tmp_path / "flow", recorded_trace)
    spec = load_spec(spec_path)

    async def replay() -> None:
        hub = _EngineBroke()
        try:
            await run_flow(
                spec,
                mode=Mode.REPLAY,
                trace_path=trace_path_for(spec_path),
                environ=clean_environ(),
                timeout_s=60,
                hub=hub,
            )
        finally:
            await hub.stop()

    started = time.monotonic()
    with pytest.raises(ConfigError, match="the proxy engine did not start within 10 s"):
        asyncio.run(replay())
    assert time.monotonic() - started < 30, "the flow waited for its timeout"


def test_the_verdict_module_is_imported_once_the_engine_is_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The warm-up itself: it imports the verdict's module after the engine started (the
    spawn pin above holds whether or not it runs; this one fails without it)."""
    events: list[str] = []

    class Hub:
        async def start(self) -> None:
            events.append("engine up")

    monkeypatch.setattr(flow.importlib, "import_module", events.append)
    asyncio.run(flow._load_while_the_agent_runs(Hub()))  # type: ignore[arg-type]
    assert events == ["engine up", "flowproof_cli.runner.verdict_phase"]
