"""The launcher's handshake runs on a thread of its own when the runner starts it before the
spawn: a contained agent then execs as soon as its filter is in place, however long the
runner's event loop stays busy (it loads the proxy engine beside the agent's start).

Each probe runs in a fresh network namespace (`unshare -n`), like every contained run here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.namespace_run import run_tagged

pytestmark = [pytest.mark.egress, pytest.mark.usefixtures("netns")]

#: A contained `touch`, spawned; the probe then waits (bounded) for the file *before* it
#: calls attach, as the runner's loop would while busy, and reports what it saw.
PROBE = """
import json, subprocess, sys, time
from pathlib import Path
from flowproof_cli.egress import Launch, Policy
early, marker = sys.argv[1] == "early", Path(sys.argv[2])
launch = Launch.prepare(Policy())
assert launch.contained, "containment unavailable"
if early:
    launch.start_handshake()
process = subprocess.Popen(
    launch.wrap(["touch", str(marker)]), pass_fds=launch.pass_fds, start_new_session=True
)
deadline = time.monotonic() + (30 if early else 2)
while not marker.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
before_attach = marker.exists()
launch.attach_sync(process.pid)
code = process.wait(30)
report = launch.finish()
print("PROBE " + json.dumps({
    "before_attach": before_attach, "after": marker.exists(), "code": code,
    "containment": report.containment.line,
}))
"""


def _probe(tmp_path: Path, mode: str) -> dict[str, object]:
    marker = tmp_path / "agent-ran"
    argv = [sys.executable, "-c", PROBE, mode, str(marker)]
    return run_tagged(argv, "PROBE", timeout=90)


def test_an_early_handshake_lets_the_agent_exec_before_attach(tmp_path: Path) -> None:
    outcome = _probe(tmp_path, "early")
    assert outcome["before_attach"] is True
    assert (outcome["after"], outcome["code"]) == (True, 0)
    assert str(outcome["containment"]).endswith("enforced (linux seccomp)")


def test_without_it_the_agent_waits_for_attach(tmp_path: Path) -> None:
    """The red path: the launcher holds the agent until attach answers it."""
    outcome = _probe(tmp_path, "late")
    assert outcome["before_attach"] is False
    assert (outcome["after"], outcome["code"]) == (True, 0)
    assert str(outcome["containment"]).endswith("enforced (linux seccomp)")


#: No agent at all: does the early handshake's thread load the supervisor while it waits for
#: the launcher (so that import overlaps the launcher's interpreter start, ~10 ms)?
IMPORT_PROBE = """
import json, sys, time
from flowproof_cli.egress import Launch, Policy
launch = Launch.prepare(Policy())
assert launch.contained, "containment unavailable"
if sys.argv[1] == "early":
    launch.start_handshake()
deadline = time.monotonic() + 10
while "flowproof_cli.egress.supervisor" not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.01)
loaded = "flowproof_cli.egress.supervisor" in sys.modules
launch.finish()  # no launcher ever answered: the waiting thread ends on end of file
print("PROBE " + json.dumps({"loaded": loaded}))
"""


def _import_probe(mode: str) -> bool:
    argv = [sys.executable, "-c", IMPORT_PROBE, mode]
    return bool(run_tagged(argv, "PROBE", timeout=60, unshare=False)["loaded"])


def test_the_early_handshake_loads_the_supervisor_before_the_launcher_answers() -> None:
    assert _import_probe("early") is True


def test_without_an_early_handshake_nothing_loads_the_supervisor_ahead() -> None:
    """The twin: the supervisor's modules are not loaded by `prepare` or `wrap` alone, so
    the probe above sees the early thread's import and nothing else."""
    assert _import_probe("late") is False
