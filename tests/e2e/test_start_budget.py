"""What a replay imports before its agent starts, pinned by module (never by a time).

Everything `flowproof run SPEC` imports before it spawns the agent is waited for on every
flow; what only the verdict needs is imported while the agent runs instead, beside the
agent's own start (`runner/flow.py`, `_AFTER_THE_AGENT`). A fresh interpreter runs the CLI
with an audit hook that takes sys.modules when the agent's process is created and again
at exit (its atexit handlers still run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from flowproof_cli.runner import flow
from tests.conftest import run_command
from tests.e2e.flows import traced_flow

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
    assert not at_spawn & set(flow._AFTER_THE_AGENT), "imported before the agent started"
    assert set(flow._AFTER_THE_AGENT) <= at_end
