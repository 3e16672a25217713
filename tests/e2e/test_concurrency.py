"""Concurrent model calls: order-tolerant matching, and the reply of the main conversation."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from flowproof_cli.cassette import Mode
from flowproof_cli.runner.flow import run_flow
from flowproof_cli.runner.rerecord import commit
from flowproof_cli.spec import load_spec
from flowproof_cli.trace import load as load_trace
from flowproof_cli.trace import trace_path_for
from tests.conftest import clean_environ, run_cli
from tests.e2e.flows import AGENTS, set_agent_env, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

#: Record and replay runs of the side-call race: a few in `make test`, 20 in
#: `make test-stress` (each run is a whole record or replay of the agent, about a second of
#: CPU; the race either way is the same one, repeated to catch an unlucky interleaving).
RUNS = int(os.environ.get("FLOWPROOF_SIDE_CALL_RUNS", "5"))


def test_calls_arriving_in_another_order_still_match(tmp_path: Path) -> None:
    steps = [{"prompt": "Compare three cities."}, {"assert": "reply contains Hello"}]
    spec = write_flow(
        tmp_path, command=f"{sys.executable} {AGENTS / 'py_concurrent.py'}", tools=[], steps=steps
    )
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 0, result.output
    assert len(load_trace(trace_path_for(spec)).turns) == 4
    for order in ("", "reverse"):
        set_agent_env(spec, AGENT_ORDER=order)
        result = run_cli("run", spec)
        assert result.code == 0, f"order={order!r}: {result.output}"


def _run(spec_path: Path, mode: Mode, environ: dict[str, str]):
    """One flow's verdict; a record's trace moved into place as the command does."""
    result = asyncio.run(
        run_flow(
            load_spec(spec_path), mode=mode, trace_path=trace_path_for(spec_path), environ=environ
        )
    )
    commit([result])
    return result


@pytest.mark.stress
def test_goose_like_side_call_never_steals_the_reply(tmp_path: Path) -> None:
    """A concurrent session-title call with its own system prompt: every run green both
    ways (RUNS of each; a stress probe: 5 in `make test`, 20 in `make test-stress`)."""
    steps = [
        {"prompt": "What's the weather in Nairobi right now? Use both tools."},
        {"assert_tool_call": "get_weather where city equals Nairobi"},
        {"assert": "reply contains sunny"},
    ]
    spec = write_flow(
        tmp_path, command=f"{sys.executable} {AGENTS / 'py_goose_like.py'}", steps=steps
    )
    with FakeUpstream() as fake:
        environ = clean_environ({"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
        recorded = [_run(spec, Mode.RECORD, environ) for _ in range(RUNS)]
    assert [r.failures for r in recorded] == [[]] * RUNS
    trace = load_trace(trace_path_for(spec))
    systems = {turn.request["messages"][0]["content"] for turn in trace.turns}
    assert len(systems) == 2, "the title call and the task share one recording"

    replayed = [_run(spec, Mode.REPLAY, clean_environ()) for _ in range(RUNS)]
    assert [r.failures for r in replayed] == [[]] * RUNS


def test_reply_from_the_side_conversation_is_a_failure(tmp_path: Path) -> None:
    """The red path of the main-thread rule: the title's text is not the reply."""
    steps = [
        {"prompt": "What's the weather in Nairobi right now? Use both tools."},
        {"assert": "reply contains Weather chat"},
    ]
    spec = write_flow(
        tmp_path, command=f"{sys.executable} {AGENTS / 'py_goose_like.py'}", steps=steps
    )
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 1
    assert "Weather chat" in result.stdout
