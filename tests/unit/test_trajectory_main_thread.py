"""Which conversation is the flow's: `Trajectory.main_thread`, and so `reply`.

Claude Code on Vertex first sends a few availability probes (`max_tokens: 1`, one short
user message, no system prompt), then the real conversation. The probes share one thread
key (no system prompt), so by turn count alone they outnumber a short conversation and
the reply was read from a probe's one token.
"""

from __future__ import annotations

from typing import Any

from flowproof_cli.cassette import Turn
from flowproof_cli.dialects.vertex import VertexAnthropic
from flowproof_cli.evidence.trace_view import trajectory_of, turn_views
from flowproof_cli.trace import Trace
from flowproof_cli.trajectory import AssistantTurn, Trajectory

VERTEX = VertexAnthropic()
MODEL_PATH = "/v1/projects/demo/locations/us-east5/publishers/anthropic/models/{model}:{method}"
SYSTEM = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}]
TOOLS = [{"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}]
PROMPT = "What's the weather in Nairobi? Use the tool."


def vertex_turn(model: str, method: str, body: dict[str, Any], response: dict[str, Any]) -> Turn:
    """A turn as record stores it: the body AnthropicVertex sends, normalized by its path."""
    path = MODEL_PATH.format(model=model, method=method)
    assert VERTEX.claims(path, {})
    request = VERTEX.canonical_request(VERTEX.normalize(path, body))
    return Turn(VERTEX.name, request, 200, response)


def message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_vrtx_0123",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5@20250929",
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": 8, "output_tokens": 1},
    }


def probe(model: str, system: list[dict[str, Any]] | None = None) -> Turn:
    """Claude Code's quota check: one token asked, one user message (without a system
    prompt, or with the conversation's)."""
    body: dict[str, Any] = {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "quota"}],
    }
    if system is not None:
        body["system"] = system
    return vertex_turn(model, "rawPredict", body, message([{"type": "text", "text": "Hi"}]))


def conversation() -> list[Turn]:
    """Two turns under Claude Code's system prompt: a tool call, then the reply."""
    base = {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 32000,
        "system": SYSTEM,
        "tools": TOOLS,
        "stream": True,
    }
    user = {"role": "user", "content": [{"type": "text", "text": PROMPT}]}
    call = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "wx"}}
    first = vertex_turn(
        "claude-sonnet-4-5@20250929",
        "streamRawPredict",
        {**base, "messages": [user]},
        message([call], stop="tool_use"),
    )
    result = {"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny, 24C"}
    second = vertex_turn(
        "claude-sonnet-4-5@20250929",
        "streamRawPredict",
        {
            **base,
            "messages": [
                user,
                {"role": "assistant", "content": [call]},
                {"role": "user", "content": [result]},
            ],
        },
        message([{"type": "text", "text": "It is sunny in Nairobi, 24C."}]),
    )
    return [first, second]


PROBES = [
    probe("claude-sonnet-4-5@20250929"),
    probe("claude-opus-4-1@20250805"),
    probe("claude-3-5-haiku@20241022"),
]


def trajectory(turns: list[Turn]) -> Trajectory:
    return trajectory_of(turn_views(Trace(flow="weather", turns=turns), "weather"))


def test_claude_codes_probes_on_vertex_never_stand_for_the_reply() -> None:
    read = trajectory([*PROBES, *conversation()])
    assert read.reply == "It is sunny in Nairobi, 24C."
    assert [turn.turn for turn in read.main_thread] == [4, 5]
    assert [call.name for call in read.tool_calls] == ["Bash"]


def test_probes_lose_wherever_they_fall_among_the_conversations_turns() -> None:
    first, second = conversation()
    read = trajectory([PROBES[0], first, PROBES[1], PROBES[2], second])
    assert read.reply == "It is sunny in Nairobi, 24C."
    assert [turn.turn for turn in read.main_thread] == [2, 5]


def test_probes_under_the_conversations_system_prompt_never_end_its_thread() -> None:
    """The probes share the conversation's thread key; one recorded after the reply (a
    concurrent check) used to be the thread's last turn, and so the reply."""
    first, second = conversation()
    probes = [probe("claude-opus-4-1@20250805", SYSTEM) for _ in range(3)]
    read = trajectory([first, probes[0], probes[1], second, probes[2]])
    assert read.reply == "It is sunny in Nairobi, 24C."
    assert [turn.turn for turn in read.main_thread] == [1, 4]


def test_a_probe_is_a_request_asking_at_most_one_token() -> None:
    read = trajectory([*PROBES, *conversation()])
    assert [turn.probe for turn in read.turns] == [True, True, True, False, False]


def test_a_run_of_probes_only_still_has_a_main_thread() -> None:
    """Nothing else was asked: the probes are all there is to read."""
    read = trajectory(PROBES)
    assert [turn.turn for turn in read.main_thread] == [1, 2, 3]
    assert read.reply == "Hi"


def test_without_probes_the_longest_thread_still_wins() -> None:
    side = AssistantTurn(turn=1, text="Weather chat", tool_calls=(), thread_key="title")
    main = [AssistantTurn(turn=n, text=f"t{n}", tool_calls=(), thread_key="main") for n in (2, 3)]
    assert Trajectory(turns=[side, *main]).reply == "t3"
