"""A simulated user, end to end: a real openai-SDK chat loop talked to by a user the model
plays at record, replayed offline from the trace's user lane, byte for byte.

The fake model answers the agent's calls, and plays the user when the simulated user's
system prompt asks it to: four messages, then DONE. Replay runs with the fake stopped;
an agent whose printed reply changed fails on the user lane, naming the turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import computed_once, run_cli
from tests.e2e.flows import AGENTS, agent_command, copy_recording
from tests.fakes.fake_upstream import FakeUpstream, Reply

pytestmark = pytest.mark.slow

CHAT_LOOP = AGENTS / "py_chat_loop.py"
PLAYING = "You are playing the user"
USER_MESSAGES = (
    "Hi, my order 4711 has not arrived.",
    "It was due last Monday.",
    "Please cancel it, I do not want a refund.",
    "Thank you, is it cancelled now?",
)
GOAL = "the agent confirms the cancellation"


def _texts(body: dict[str, Any], role: str) -> list[str]:
    return [
        str(message.get("content"))
        for message in body.get("messages") or []
        if isinstance(message, dict) and message.get("role") == role
    ]


def script(dialect: str, body: dict[str, Any]) -> Reply:
    """The agent's calls answered by a fixed bot; the simulated user's by the next of
    USER_MESSAGES (it counts those it said, its `assistant` side), then DONE."""
    system = "".join(_texts(body, "system"))
    if PLAYING in system:
        said = sum(1 for text in _texts(body, "assistant") if text in USER_MESSAGES)
        return Reply(text=USER_MESSAGES[said] if said < len(USER_MESSAGES) else "DONE")
    said = _texts(body, "user")[-1]
    answer = "Your order 4711 is cancelled." if "cancel" in said else f"Noted: {said}"
    return Reply(text=answer)


def simulated_flow(folder: Path, **user: Any) -> Path:
    spec = {
        "name": "simulated customer",
        "app": "agent",
        "agent": {
            "command": agent_command(CHAT_LOOP),
            "env": {},
            "conversation": {"until": "^> $", "wait_first": True},
        },
        "steps": [
            {"user": "Hello."},
            {
                "user": {
                    "simulate": "You are a customer whose order 4711 is late. You want it "
                    "cancelled, not refunded.",
                    "until": GOAL,
                    "max_turns": 5,
                    **user,
                }
            },
            {"assert": "reply contains cancelled"},
        ],
    }
    path = folder / "simulated.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def record(spec: Path, fake: FakeUpstream):  # type: ignore[no-untyped-def]
    env = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "sk-sim-12345"}
    return run_cli("record", spec, env=env)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def record_once() -> str:
        spec = simulated_flow(tmp_path_factory.mktemp("simulated"))
        with FakeUpstream(script=script, seed=3) as fake:
            result = record(spec, fake)
            assert result.code == 0, result.output
            asked = [r for r in fake.model_requests() if PLAYING in str(r.body)]
            assert len(asked) == 5  # four messages, then DONE
            assert asked[0].headers["authorization"] == "Bearer sk-sim-12345"
        return str(spec.parent)

    return Path(computed_once(tmp_path_factory, "simulated-user-recording", record_once))


@pytest.fixture
def recorded(recording: Path, tmp_path: Path) -> Path:
    return copy_recording(recording, tmp_path, "simulated")


def test_the_simulated_conversation_is_recorded_in_the_user_lane(recorded: Path) -> None:
    trace = yaml.safe_load(recorded.with_name("simulated.trace.yaml").read_text())
    conversation = trace["conversation"]
    assert [turn["user"] for turn in conversation["turns"]] == ["Hello.", *USER_MESSAGES]
    assert [turn.get("simulated", False) for turn in conversation["turns"]] == [
        False,
        True,
        True,
        True,
        True,
    ]
    lane = conversation["user"]
    assert [call["answer"] for call in lane] == [*USER_MESSAGES, "DONE"]
    assert {call["step"] for call in lane} == {2}
    assert {call["protocol"] for call in lane} == {"openai-chat"}
    assert lane[0]["request"]["model"] == "gpt-4o-mini"  # the agent's model
    assert "sk-sim-12345" not in recorded.with_name("simulated.trace.yaml").read_text()


def test_replays_offline_twice_with_the_same_messages(recorded: Path) -> None:
    trace_before = recorded.with_name("simulated.trace.yaml").read_bytes()
    for _ in range(2):
        result = run_cli("run", recorded, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
        assert result.code == 0, result.output
        assert result.stdout.startswith("PASS: simulated customer")
    assert recorded.with_name("simulated.trace.yaml").read_bytes() == trace_before


def test_a_changed_agent_reply_fails_on_the_user_lane_naming_the_turn(recorded: Path) -> None:
    # From its third answer on the agent prints more: its model calls still match (their
    # history holds the model's answers), what the simulated user reads does not.
    spec = yaml.safe_load(recorded.read_text())
    spec["agent"]["env"].update(AGENT_SIGNATURE="(v2)", AGENT_SIGNATURE_FROM="3")
    recorded.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run_cli("run", recorded, "--json")
    assert result.code == 1, result.output
    (flow,) = json.loads(result.stdout)["flows"]
    divergence = flow["divergence"]
    assert divergence["summary"] == (
        "the user lane, call 3: the simulated user was told something different in turn 3: "
        "the agent's reply changed"
    )
    assert divergence["details"] == [
        "what it read (- recorded, + now):",
        f"- Noted: {USER_MESSAGES[1]}",
        f"+ Noted: {USER_MESSAGES[1]} (v2)",
    ]
    assert divergence["lane"] == "user" and divergence["conversation_turn"] == 3


def test_max_turns_reached_fails_naming_the_goal(tmp_path: Path) -> None:
    spec = simulated_flow(tmp_path, max_turns=2)
    with FakeUpstream(script=script, seed=3) as fake:
        result = record(spec, fake)
    assert result.code == 1, result.output
    line = spec.read_text().splitlines().index("- user:") + 1
    assert (
        f"the simulated user of the `user:` step at line {line} did not reach its goal "
        f'"{GOAL}" within 2 turns' in result.stdout
    ), result.output
    assert not spec.with_name("simulated.trace.yaml").exists()


def test_a_simulated_user_speaking_first_needs_a_model(tmp_path: Path) -> None:
    spec_path = simulated_flow(tmp_path)
    spec = yaml.safe_load(spec_path.read_text())
    del spec["steps"][0]  # the simulated user speaks first: no call of the agent's yet
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with FakeUpstream(script=script, seed=3) as fake:
        result = record(spec_path, fake)
    assert result.code == 1, result.output
    assert "speaks before the agent made any model call" in result.stdout
    assert "Fix: add `model: openai/gpt-4o-mini`" in result.stdout

    spec["steps"][0]["user"]["model"] = "openai/gpt-4o-mini"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with FakeUpstream(script=script, seed=3) as fake:
        result = record(spec_path, fake)
    assert result.code == 0, result.output
    result = run_cli("run", spec_path)
    assert result.code == 0, result.output
