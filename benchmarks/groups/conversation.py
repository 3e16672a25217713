"""Conversations: a 20-turn conversation replayed in one flow against the same agent run as
20 one-turn flows, and each turn's latency inside the conversation against a one-turn flow's.

The agent (clients/conversation_agent.py) is recorded once each way through `flowproof
record` against the bare stub. The conversation's whole run is timed from spawn to exit, as
the directory of one-turn flows is (one `flowproof run DIR`). The agent times its own model
calls: inside a conversation a turn's request carries the history, so its latency may grow
with the request's size, and by nothing else (the open turn is found in constant time).
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks import harness, payloads
from benchmarks.harness import Row, Settings

TURNS = 20
AGENT = harness.BENCH / "clients" / "conversation_agent.py"


def _message(number: int) -> str:
    return f"Question {number}: where is my order {4700 + number}?"


def _agent(times: Path, **extra: Any) -> dict[str, Any]:
    command = f"{shlex.quote(harness.PYTHON)} {shlex.quote(str(AGENT))}"
    return {"command": command, "env": {"BENCH_TURN_TIMES": str(times)}, **extra}


def _conversation(times: Path) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for number in range(1, TURNS + 1):
        steps += [{"user": _message(number)}, {"assert": f"reply contains answer {number}"}]
    agent = _agent(times, conversation={"until": "^> $"})
    return {"name": "conversation", "app": "agent", "agent": agent, "steps": steps}


def _one_turn(number: int, times: Path) -> dict[str, Any]:
    steps = [{"prompt": _message(number)}, {"assert": f"reply contains answer {number}"}]
    return {
        "name": f"one turn {number:02d}",
        "app": "agent",
        "agent": _agent(times),
        "steps": steps,
    }


def _record(spec: Path, stub: harness.Server) -> None:
    env = {"FLOWPROOF_AGENT_UPSTREAM": stub.base_url, "FLOWPROOF_AGENT_KEY": "sk-bench"}
    harness.timed([harness.FLOWPROOF, "record", str(spec)], env=env, cwd=spec.parent)
    if not spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml")).exists():
        raise SystemExit(f"conversation bench: recording {spec} wrote no trace")


def _times(path: Path) -> list[float]:
    values = [float(line) for line in path.read_text().split()] if path.exists() else []
    path.unlink(missing_ok=True)
    return values


def run(settings: Settings) -> list[Row]:
    rounds = settings.flow_rounds
    harness.log(f"conversation: {TURNS} turns as one conversation and as {TURNS} flows x {rounds}")
    with tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp:
        folder = Path(temp)
        times = folder / "turn-times.txt"
        answers = [payloads.completion(f"answer {n}") for n in range(1, TURNS + 1)]
        responses = payloads.stub_responses(folder / "model.json", answers)
        conversation = folder / "conversation" / "conversation.flow.yaml"
        flows = folder / "flows"
        conversation.parent.mkdir()
        flows.mkdir()
        conversation.write_text(yaml.safe_dump(_conversation(times), sort_keys=False))
        stub_argv = [harness.PYTHON, str(harness.BENCH / "servers" / "stub.py"), str(responses)]
        with harness.Server("stub", stub_argv) as stub:  # answers in turn, one per call
            _record(conversation, stub)
        for number in range(1, TURNS + 1):  # each its own stub, answering that one turn
            spec = flows / f"turn{number:02d}.flow.yaml"
            spec.write_text(yaml.safe_dump(_one_turn(number, times), sort_keys=False))
            payloads.stub_responses(responses, [answers[number - 1]])
            with harness.Server("stub", stub_argv) as stub:
                _record(spec, stub)
        _times(times)  # the recordings' own
        walls: dict[str, list[float]] = {"conversation": [], "flows": []}
        inside: list[list[float]] = []
        alone: list[float] = []
        for name in harness.abba(("conversation", "flows"), rounds):
            target = conversation if name == "conversation" else flows
            walls[name].append(harness.timed([harness.FLOWPROOF, "run", str(target)]))
            (inside.append if name == "conversation" else alone.extend)(_times(times))
    return _rows(walls, inside, alone)


def _rows(
    walls: dict[str, list[float]], inside: list[list[float]], alone: list[float]
) -> list[Row]:
    whole, split = harness.median(walls["conversation"]), harness.median(walls["flows"])
    first = harness.median([turns[0] for turns in inside if turns])
    last = harness.median([turns[-1] for turns in inside if turns])
    middle = harness.median([value for turns in inside for value in turns[1:-1]])
    one = harness.median(alone)
    return [
        Row(
            "conversation",
            f"{TURNS}-turn conversation, one flow (replay)",
            harness.seconds(whole),
            f"{whole / split:.2f}x of {TURNS} one-turn flows",
        ),
        Row(
            "conversation",
            f"the same {TURNS} turns as {TURNS} one-turn flows (replay, one run)",
            harness.seconds(split),
            "1.00x",
        ),
        Row("conversation", "per turn: a one-turn flow's model call", harness.ms(one), "1.00x"),
        Row(
            "conversation",
            "per turn: conversation turn 1",
            harness.ms(first),
            f"{first / one:.2f}x",
        ),
        Row(
            "conversation",
            f"per turn: conversation turns 2-{TURNS - 1} (median)",
            harness.ms(middle),
            f"{middle / one:.2f}x",
        ),
        Row(
            "conversation",
            f"per turn: conversation turn {TURNS} (the longest history)",
            harness.ms(last),
            f"{last / one:.2f}x",
        ),
    ]
