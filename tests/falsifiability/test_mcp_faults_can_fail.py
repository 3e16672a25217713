"""Every verdict form of the MCP replayer's faults can FAIL, and its twin (the one change
undone) passes.

One flow (tests/e2e/agents/py_openai_mcp.py: the openai SDK with the real notes server over
stdio) is recorded once with a `tool_error` at its first `tools/call`: the agent does not
retry, the model hears the error and gives up. Each case is a copy with one change to the
spec, the agent or the trace, replayed offline. A case states its exit code and a fragment
of the failure."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.mcp_flows import NOTES_V2
from tests.fakes.fake_upstream import Reply, sequence
from tests.falsifiability.twin_runs import FaultCase, replay_cases, verdict_tests, verdicts_fixture

pytestmark = pytest.mark.slow

AGENT = Path(__file__).resolve().parents[1] / "e2e" / "agents" / "py_openai_mcp.py"
SERVER = {"name": "notes", "command": f"{shlex.quote(sys.executable)} {shlex.quote(str(NOTES_V2))}"}
DISK_FULL = {"at": "mcp notes call 1", "tool_error": "disk full"}
WRITE = ("write_note", json.dumps({"name": "a.txt", "text": "hello"}))
STEPS = [
    {"prompt": "Write hello to a.txt, then read it back."},
    {"assert": "reply contains server is down"},
]


def spec(notes: Path, faults: list[dict[str, Any]] | None, **agent_env: str) -> dict[str, Any]:
    """The flow with `faults` (None: the base flow's, a tool error at the first call)."""
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    return {
        "name": "faulted notes",
        "app": "agent",
        # RETRY_MUST_SUCCEED: a retry the replay refuses ends the agent, so the replayer's
        # refusal is the verdict (caught, the agent would tell the model, whose changed
        # request would be the divergence named first); without RETRY_TOOL_ERRORS it is idle
        "agent": {
            "command": command,
            "env": {"NOTES_DIR": str(notes), "RETRY_MUST_SUCCEED": "1", **agent_env},
        },
        "mcp": [SERVER],
        "faults": [DISK_FULL] if faults is None else faults,
        "steps": STEPS,
    }


def _fault_only_in_the_lane(trace: dict[str, Any]) -> None:
    """The trace as if recorded without the flow's faults, but for its lane's write, which
    still holds the fault it was recorded with (a hand-merged or half-edited trace).

    The spec's fault removed alone is refused before the replay starts (exit 2, "recorded
    with other faults than the spec's"): the trace's `faults:` goes too, so spec and trace
    agree and only the lane's own record of the fault is left for the replayer to find."""
    trace.pop("faults", None)


CASES: dict[str, FaultCase] = {
    "mcp-fault-not-applied": FaultCase(
        1,
        "it was recorded with the fault `mcp notes call 1: tool_error: disk full`, which this "
        "replay does not apply; re-record the flow",
        faults=[],
        trace=_fault_only_in_the_lane,
    ),
    "mcp-retried-where-the-recording-did-not": FaultCase(
        1,
        "the agent retried tools/call write_note after the fault `mcp notes call 1: "
        "tool_error: disk full`, and the recording has no retry of it (the agent did not "
        "retry then); re-record the flow",
        agent_env={"RETRY_TOOL_ERRORS": "1"},
    ),
}


def _all_cases(root: Path) -> dict[str, list[Any]]:
    notes = root / "notes"
    cases = {
        name: (spec(notes, case.faults, **case.agent_env), case.trace)
        for name, case in CASES.items()
    }
    script = sequence(Reply(tool_calls=[WRITE]), Reply(text="The notes server is down."))
    return replay_cases(root, spec(notes, [DISK_FULL]), cases, script=script)


verdicts = verdicts_fixture("mcp-fault-cases", _all_cases)

test_the_case_fails_with_its_message, test_the_twin_of_every_case_passes = verdict_tests(CASES)
