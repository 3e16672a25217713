"""Containment through the real CLI: record and replay contained with real SDK agents, the
tier line, the trace's egress section, `assert_no_egress` verdicts, the warning and the
filesystem report. Every scenario runs inside a network namespace (tests/egress/cli_lab.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.egress.conftest import lab_fixture

pytestmark = [pytest.mark.egress, pytest.mark.slow, pytest.mark.usefixtures("netns")]

ENFORCED = "    egress containment: enforced (linux seccomp)"
NESTED = (
    "another seccomp user-notification sandbox already supervises this process tree (EBUSY): "
    "a nested sandbox cannot be supervised"
)


lab = lab_fixture("egress-cli-lab", "tests.egress.cli_lab", "CLI_LAB")


def test_real_sdk_agent_records_and_replays_certified(lab: dict[str, Any]) -> None:
    record, replay = lab["sdk_record"], lab["sdk_replay"]
    assert record["code"] == 0, record
    assert record["stdout"].startswith("PASS: sdk flow\n" + ENFORCED + "\n"), record
    assert replay["code"] == 0, replay
    assert ENFORCED in replay["stdout"].splitlines()
    assert "egress:" not in lab["sdk_trace"]  # nothing blocked: the trace is as before
    assert lab["sdk_tx"] == 0  # the model is on loopback; nothing left the namespace


def test_blocked_destination_is_in_the_trace_and_refused_again_at_replay(
    lab: dict[str, Any],
) -> None:
    record, replay = lab["leaky_record"], lab["leaky_replay"]
    assert record["code"] == 0, record
    assert replay["code"] == 0, replay
    egress = yaml.safe_load(lab["leaky_trace"])["egress"]
    [blocked] = egress["blocked"]
    assert (blocked["destination"], blocked["protocol"]) == ("203.0.113.7:443", "tcp")
    assert isinstance(blocked["at_ms"], int)
    # the agent saw the same refusal at record, at replay, and in the certified record
    assert lab["probe"] == ["ECONNREFUSED"] * 4
    assert lab["leaky_tx"] == 0
    flow = json.loads(lab["leaky_replay_json"]["stdout"])["flows"][0]
    assert flow["containment"] == ENFORCED.strip()


def test_filesystem_observation_on_stderr(lab: dict[str, Any]) -> None:
    stderr = lab["leaky_record"]["stderr"].splitlines()
    assert "filesystem observation: observed (linux seccomp); 1 destructive syscall(s)" in stderr
    unlinks = [line for line in stderr if line.startswith("  unlink ")]
    assert len(unlinks) == 1 and re.fullmatch(r"  unlink /\S+/scratch.txt at \d+ms", unlinks[0])
    assert "filesystem observation" not in lab["sdk_record"]["stderr"]  # destroyed nothing
    assert "  blocked tcp 203.0.113.7:443 (connect) at " in lab["leaky_record"]["stderr"]


def test_assert_no_egress_failing_at_record_writes_no_trace(lab: dict[str, Any]) -> None:
    record = lab["certified_record"]
    assert record["code"] == 1, record
    assert re.search(
        r"FAIL: certified flow - assert_no_egress: the agent attempted 1 undeclared "
        r"destination\(s\): tcp 203\.0\.113\.7:443 \(connect at \d+ms\) \(step at line \d+\)",
        record["stdout"],
    ), record
    assert "no trace written" in record["stdout"]
    assert lab["certified_trace"] is None


def test_uncontained_run_warns_about_the_declaration(lab: dict[str, Any]) -> None:
    record = lab["warned_record"]
    assert record["code"] == 0, record
    assert f"    egress containment: not contained ({NESTED})" in record["stdout"]
    assert (
        "    warning: agent.allow_egress [api.example.invalid:443] was not applied "
        f"({NESTED}), so this run reached whatever it liked; add the step "
        "`- assert_no_egress` to make containment a requirement of this flow"
    ) in record["stdout"]


def test_assert_no_egress_cannot_certify_an_uncontained_run(lab: dict[str, Any]) -> None:
    record = lab["uncertified_record"]
    assert record["code"] == 1, record
    assert f"assert_no_egress: cannot certify: {NESTED} (step at line" in record["stdout"]
    assert lab["uncertified_trace"] is None


def test_a_flow_that_engages_nothing_prints_its_tier(lab: dict[str, Any]) -> None:
    record = lab["plain_record"]
    assert record["code"] == 0, record
    assert (
        "    egress containment: not contained (the flow declares no allow_egress and no "
        "assert_no_egress)"
    ) in record["stdout"].splitlines()


def test_a_missing_command_fails_as_it_does_uncontained(lab: dict[str, Any]) -> None:
    record = lab["missing_record"]
    assert record["code"] == 2, record
    assert "cannot start the agent: 'definitely-not-a-command-xyz' was not found" in (
        record["stdout"] + record["stderr"]
    )
