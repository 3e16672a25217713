"""Load: many flows at once, many calls at once, and a hostile client beside them.

- One agent fires 64 model calls at once (asyncio and the openai SDK), each about a place of
  its own. Recorded once through the fake upstream, each call reaches it exactly once and
  the trace holds each with its own answer; replayed, each call gets its own turn back (the
  agent checks, and its last call carries the count, so a crossed or dropped answer is a
  divergence). A trace with two answers swapped fails the replay: the check can fail.
- A directory run at `-j 8` of tool-loop flows about as many places (8 in `make test`,
  30 in `make test-stress`: FLOWPROOF_LOAD_PLACES), the 64-call agent, and a hostile
  neighbour that holds 300 idle connections and a client sending a byte a second on its
  own flow's listener until every other flow has finished. All pass, and the neighbour saw
  every other flow finish while it held them: measured by the flows that finished, never
  by a time.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import run_cli
from tests.e2e.flows import agent_command, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AGENTS = Path(__file__).resolve().parent / "agents"
CONCURRENT = AGENTS / "concurrent_calls.py"
HOSTILE = AGENTS / "hostile_neighbour.py"
CALLS = 64
PLACES = int(os.environ.get("FLOWPROOF_LOAD_PLACES", "8"))  # `make test-stress`: 30
FLOWS = PLACES + 2  # the places, the 64-call agent and the hostile neighbour
WORKERS = "8"
TIMEOUT_S = 600


def trace_of(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.", ".trace."))


def record(spec: Path, **env: str) -> FakeUpstream:
    """Record `spec` through a seeded fake upstream; the fake, to read what reached it."""
    with FakeUpstream(seed=64) as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", **env}
        result = run_cli("record", spec, cwd=spec.parent, env=upstream, timeout=TIMEOUT_S)
    assert result.code == 0, result.output
    return fake


def user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


# -- 64 calls at once ----------------------------------------------------------------------


def write_concurrent_flow(folder: Path) -> Path:
    return write_flow(
        folder,
        name="concurrent",
        command=agent_command(CONCURRENT),
        tools=[],
        steps=[
            {"prompt": "Ask about every place at once."},
            {"assert": f"reply contains {CALLS} of {CALLS} answered with their own turn"},
        ],
    )


@pytest.fixture(scope="module")
def concurrent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 64-call flow, recorded once; checks what reached the upstream and the trace."""
    spec = write_concurrent_flow(tmp_path_factory.mktemp("concurrent"))
    fake = record(spec)
    asked = Counter(user_text(request.body) for request in fake.model_requests())
    prompts = {f"Call {n}: how is the weather in Place{n:02d}?" for n in range(CALLS)}
    assert prompts <= set(asked), sorted(prompts - set(asked))
    assert all(asked[prompt] == 1 for prompt in prompts), "a call reached the upstream twice"
    assert len(fake.model_requests()) == CALLS + 1  # and the report
    turns = yaml.safe_load(trace_of(spec).read_text())["turns"]
    assert len(turns) == CALLS + 1
    for turn in turns:  # each recorded with its own answer
        answer = turn["response"]["body"]["choices"][0]["message"]["content"]
        assert user_text(turn["request"]) in answer, (user_text(turn["request"]), answer)
    return spec


def test_64_concurrent_calls_replay_each_to_its_own_turn(concurrent: Path, tmp_path: Path) -> None:
    spec = tmp_path / concurrent.name
    shutil.copy(concurrent, spec)
    shutil.copy(trace_of(concurrent), trace_of(spec))
    result = run_cli("run", spec, cwd=tmp_path, timeout=TIMEOUT_S)
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS: concurrent flow"), result.output


def test_a_crossed_answer_fails_the_replay(concurrent: Path, tmp_path: Path) -> None:
    """Two recorded answers swapped: two calls get each other's answer. The agent sees it,
    and its report is a request the recording never saw: a divergence (exit 1)."""
    spec = tmp_path / concurrent.name
    shutil.copy(concurrent, spec)
    trace = yaml.safe_load(trace_of(concurrent).read_text())
    first, second = trace["turns"][3], trace["turns"][7]
    first["response"], second["response"] = second["response"], first["response"]
    trace_of(spec).write_text(yaml.safe_dump(trace, sort_keys=True))
    result = run_cli("run", spec, cwd=tmp_path, timeout=TIMEOUT_S)
    assert result.code == 1, result.output
    assert f"divergence at turn {CALLS + 1}: message 1 (user) content changed" in result.stdout
    assert f"recorded: Report: {CALLS} of {CALLS} answered" in result.stdout
    assert f"replayed: Report: {CALLS - 2} of {CALLS} answered" in result.stdout


# -- many flows at -j 8, one hostile -------------------------------------------------------


def place(number: int) -> str:
    return f"Place{number:02d}"


def write_places(folder: Path) -> None:
    """PLACES tool-loop flows, each about its own place: the first recorded, the others its
    trace with the place renamed (the same requests a record of each would send)."""
    first = write_flow(
        folder,
        name="place00",
        steps=[
            {"prompt": f"What's the weather in {place(0)} right now? Use both tools."},
            {"assert_tool_call": f"get_weather where city equals {place(0)}"},
            {"assert_tool_call": "get_time"},
            {"assert": f"reply contains The weather in {place(0)} is sunny"},
        ],
    )
    record(first)
    spec_text, trace_text = first.read_text(), trace_of(first).read_text()
    for number in range(1, PLACES):
        spec = folder / f"place{number:02d}.flow.yaml"
        for source, target in ((spec_text, spec), (trace_text, trace_of(spec))):
            renamed = source.replace(place(0), place(number))
            target.write_text(renamed.replace("place00", f"place{number:02d}"))


def write_hostile(folder: Path) -> Path:
    """The hostile neighbour, recorded alone (no peer to wait for)."""
    spec = write_flow(
        folder,
        name="hostile",
        command=agent_command(HOSTILE),
        tools=[],
        env={"HOSTILE_DIR": str(folder), "HOSTILE_REPORT": str(folder / "hostile.json")},
        steps=[
            {"prompt": "Be a bad neighbour."},
            {"assert": "reply contains are you still serving"},
        ],
    )
    record(spec, HOSTILE_PEERS="0", HOSTILE_IDLE="5")
    (folder / "hostile.json").unlink()
    return spec


@pytest.mark.stress
def test_many_flows_at_j8_finish_beside_a_hostile_client(concurrent: Path, tmp_path: Path) -> None:
    write_places(tmp_path)
    write_hostile(tmp_path)
    shutil.copy(concurrent, tmp_path / concurrent.name)
    shutil.copy(trace_of(concurrent), trace_of(tmp_path / concurrent.name))
    (tmp_path / "suite.yaml").write_text('after_each: touch "$FLOWPROOF_SPEC.done"\n')
    assert len(list(tmp_path.glob("*.flow.yaml"))) == FLOWS
    env = {"HOSTILE_PEERS": str(FLOWS - 1), "HOSTILE_IDLE": "300"}
    result = run_cli("run", tmp_path, "-j", WORKERS, "-q", env=env, timeout=TIMEOUT_S)
    assert result.code == 0, result.output
    assert result.stdout.splitlines()[-1] == f"{FLOWS} passed, 0 failed, 0 skipped", result.output
    for number in range(PLACES):
        assert f"PASS: place{number:02d} flow" in result.stdout
    seen = json.loads((tmp_path / "hostile.json").read_text())
    print(f"the hostile neighbour held its connections while they finished: {seen}")
    assert seen["peers_done"] == FLOWS - 1, seen  # every other flow finished while it held them
    assert seen["idle_open"] + seen["slow_alive"] > 0, "the hostility was over before they ended"


def test_the_measure_sees_a_peer_that_never_finishes(tmp_path: Path) -> None:
    """The neighbour's count can fail: told to wait for a peer that never comes, it gives up
    at its deadline and reports none done."""
    spec = write_hostile(tmp_path)
    env = {"HOSTILE_PEERS": "1", "HOSTILE_IDLE": "5", "HOSTILE_DEADLINE_S": "2"}
    result = run_cli("run", spec, cwd=tmp_path, env=env, timeout=TIMEOUT_S)
    assert result.code == 0, result.output
    assert json.loads((tmp_path / "hostile.json").read_text())["peers_done"] == 0
