"""Divergence reports: coarse-to-fine one-line answers, and the nearest recorded turn."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from flowproof_cli.cassette import Turn
from flowproof_cli.cassette.diff import field_changes, show
from flowproof_cli.cassette.divergence import Divergence, explain, nearest_turn

PROTOCOL = "openai-chat"


def weather_tool(city_type: str = "string") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": city_type}},
                "required": ["city"],
            },
        },
    }


def time_tool() -> dict[str, Any]:
    return {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}


def base_request() -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "temperature": 0,
        "tools": [weather_tool()],
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Nairobi?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Nairobi"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp":21}'},
        ],
    }


def recorded_turn(request: dict[str, Any] | None = None, protocol: str = PROTOCOL) -> Turn:
    return Turn(protocol, request if request is not None else base_request(), 200, {"choices": []})


def explain_change(request: dict[str, Any], turn_number: int = 1) -> Divergence:
    return explain(turn_number, recorded_turn(), PROTOCOL, request)


def test_protocol_changed() -> None:
    divergence = explain(3, recorded_turn(protocol="anthropic-messages"), PROTOCOL, base_request())
    assert divergence == Divergence(
        3, "turn 3: protocol changed: recorded anthropic-messages, replayed openai-chat"
    )


def test_model_changed() -> None:
    request = base_request()
    request["model"] = "gpt-4o"
    divergence = explain_change(request, 2)
    assert divergence.turn == 2
    assert divergence.summary == "turn 2: model changed: recorded gpt-4o-mini, replayed gpt-4o"
    assert divergence.details == ()


def test_tool_added() -> None:
    request = base_request()
    request["tools"].append(time_tool())
    divergence = explain_change(request)
    assert divergence.summary == "turn 1: tools offered changed: added get_time"
    assert divergence.details == (
        "recorded: ['get_weather']",
        "replayed: ['get_time', 'get_weather']",
    )


def test_tool_removed() -> None:
    request = base_request()
    request["tools"] = []
    divergence = explain_change(request)
    assert divergence.summary == "turn 1: tools offered changed: removed get_weather"
    assert divergence.details == ("recorded: ['get_weather']", "replayed: []")


def test_tool_added_and_removed() -> None:
    request = base_request()
    request["tools"] = [time_tool()]
    divergence = explain_change(request)
    assert (
        divergence.summary == "turn 1: tools offered changed: added get_time; removed get_weather"
    )


def test_tool_schema_change_names_the_path() -> None:
    request = base_request()
    request["tools"] = [weather_tool("integer")]
    divergence = explain_change(request)
    assert divergence.summary == (
        "turn 1: tools offered changed: the declaration of get_weather changed"
    )
    assert divergence.details == (
        "get_weather.function.parameters.properties.city.type: recorded string, replayed integer",
    )
    assert divergence.message == (
        "turn 1: tools offered changed: the declaration of get_weather changed\n"
        "  get_weather.function.parameters.properties.city.type: recorded string, replayed integer"
    )


def test_tool_order_moved() -> None:
    recorded = base_request()
    recorded["tools"] = [weather_tool(), time_tool()]
    request = copy.deepcopy(recorded)
    request["tools"].reverse()
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == "turn 1: tools offered changed: order of tools moved"


def test_conversation_shape_changed() -> None:
    request = base_request()
    request["messages"].append({"role": "user", "content": "and tomorrow?"})
    divergence = explain_change(request)
    assert divergence.summary == "turn 1: conversation shape changed"
    assert divergence.details == (
        "recorded: ['system', 'user', 'assistant', 'tool']",
        "replayed: ['system', 'user', 'assistant', 'tool', 'user']",
    )


def test_message_content_changed() -> None:
    request = base_request()
    request["messages"][1]["content"] = "Weather in Paris?"
    divergence = explain_change(request)
    assert divergence.summary == "turn 1: message 1 (user) content changed"
    assert divergence.details == (
        "recorded: Weather in Nairobi?",
        "replayed: Weather in Paris?",
    )


def test_message_content_changed_is_trimmed_in_details() -> None:
    recorded = base_request()
    recorded["messages"][0]["content"] = "line one\n" + "a" * 400
    request = copy.deepcopy(recorded)
    request["messages"][0]["content"] = "line one\n" + "b" * 400
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == "turn 1: message 0 (system) content changed"
    recorded_line, replayed_line = divergence.details
    assert recorded_line == "recorded: line one\\n" + "a" * 287 + "..."
    assert replayed_line == "replayed: line one\\n" + "b" * 287 + "..."
    assert len(recorded_line) == len("recorded: ") + 300


def test_structured_content_changed_shows_paths() -> None:
    recorded = base_request()
    recorded["messages"][1]["content"] = [{"type": "text", "text": "Nairobi"}]
    request = copy.deepcopy(recorded)
    request["messages"][1]["content"] = [{"type": "text", "text": "Paris"}]
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == "turn 1: message 1 (user) content changed"
    assert divergence.details == ("content.0.text: recorded Nairobi, replayed Paris",)


def set_arguments(request: dict[str, Any], arguments: str) -> dict[str, Any]:
    request["messages"][2]["tool_calls"][0]["function"]["arguments"] = arguments
    return request


def test_argument_drift_as_a_path() -> None:
    request = set_arguments(base_request(), '{"city": "Paris"}')
    divergence = explain_change(request)
    assert divergence.summary == (
        "turn 1: tool-call arguments drifted in message 2 (assistant): "
        "get_weather.city: recorded Nairobi, replayed Paris"
    )
    assert divergence.details == ()


def test_argument_drift_with_several_fields() -> None:
    recorded = set_arguments(base_request(), '{"city": "Nairobi", "days": 1, "unit": "C"}')
    request = set_arguments(copy.deepcopy(recorded), '{"city": "Paris", "days": 3, "unit": "C"}')
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == (
        "turn 1: tool-call arguments drifted in message 2 (assistant): "
        "get_weather.city: recorded Nairobi, replayed Paris"
    )
    assert divergence.details == ("get_weather.days: recorded 1, replayed 3",)


def test_non_json_arguments_are_shown_whole() -> None:
    recorded = set_arguments(base_request(), "city=Nairobi")
    request = set_arguments(copy.deepcopy(recorded), "city=Paris")
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == (
        "turn 1: tool-call arguments drifted in message 2 (assistant): "
        "get_weather arguments: recorded 'city=Nairobi', replayed 'city=Paris'"
    )


def test_spacing_only_argument_change_is_shown_whole() -> None:
    request = set_arguments(base_request(), '{"city":"Nairobi"}')
    divergence = explain_change(request)
    assert divergence.summary == (
        "turn 1: tool-call arguments drifted in message 2 (assistant): "
        """get_weather arguments: recorded '{"city": "Nairobi"}', replayed '{"city":"Nairobi"}'"""
    )


def test_tool_call_name_changed() -> None:
    request = base_request()
    request["messages"][2]["tool_calls"][0]["function"]["name"] = "get_time"
    divergence = explain_change(request)
    assert divergence.summary == (
        "turn 1: tool-call arguments drifted in message 2 (assistant): "
        "tool call changed: recorded get_weather, replayed get_time"
    )


def test_parameters_changed() -> None:
    request = base_request()
    request["temperature"] = 0.7
    divergence = explain_change(request)
    assert divergence.summary == (
        "turn 1: request parameters changed: temperature: recorded 0, replayed 0.7"
    )
    assert divergence.details == ()


def test_parameter_added() -> None:
    request = base_request()
    request["max_tokens"] = 100
    divergence = explain_change(request)
    assert (
        divergence.summary
        == "turn 1: request parameters changed: max_tokens: added in replay (100)"
    )


def test_coarser_levels_win() -> None:
    """A model change is reported even when the tools and the messages changed too."""
    request = base_request()
    request["model"] = "gpt-4o"
    request["tools"] = []
    request["messages"][1]["content"] = "other"
    request["temperature"] = 1
    assert explain_change(request).summary == (
        "turn 1: model changed: recorded gpt-4o-mini, replayed gpt-4o"
    )


def test_divergence_message_indents_details() -> None:
    divergence = Divergence(1, "summary", ("a", "b"))
    assert divergence.message == "summary\n  a\n  b"
    assert Divergence(1, "only").message == "only"


# --- diff helpers -------------------------------------------------------------------------


def test_show_trims_and_escapes() -> None:
    assert show("a\nb") == "a\\nb"
    assert show({"k": [1, 2]}) == '{"k": [1, 2]}'
    assert show("x" * 100, 10) == "xxxxxxx..."


def test_field_changes_limit() -> None:
    recorded = {f"k{i}": i for i in range(5)}
    replayed = {f"k{i}": i + 1 for i in range(5)}
    assert field_changes(recorded, replayed, limit=2) == [
        "k0: recorded 0, replayed 1",
        "k1: recorded 1, replayed 2",
        "... and 3 more change(s)",
    ]


# --- nearest_turn -------------------------------------------------------------------------


def conversation(*contents: str, model: str = "gpt-4o-mini") -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": content} for content in contents],
    }


def test_nearest_turn_prefers_the_longest_common_prefix() -> None:
    turns = [
        recorded_turn(conversation("a")),
        recorded_turn(conversation("a", "b", "c")),
        recorded_turn(conversation("x", "b", "c")),
    ]
    assert nearest_turn(turns, [0, 1, 2], PROTOCOL, conversation("a", "b", "z")) == 1


def test_nearest_turn_prefers_same_model_and_protocol() -> None:
    turns = [
        recorded_turn(conversation("a", "b"), protocol="other"),
        recorded_turn(conversation("a", "b", model="gpt-4o")),
        recorded_turn(conversation("q")),
    ]
    assert nearest_turn(turns, [0, 1, 2], PROTOCOL, conversation("a", "c")) == 2


def test_nearest_turn_only_considers_candidates() -> None:
    turns = [recorded_turn(conversation("a", "b")), recorded_turn(conversation("z"))]
    assert nearest_turn(turns, [1], PROTOCOL, conversation("a", "b", "c")) == 1


@pytest.mark.parametrize("candidates", [[0, 1, 2], [2, 1, 0], [1, 2, 0]])
def test_nearest_turn_ties_go_to_the_earliest(candidates: list[int]) -> None:
    same = conversation("a", "b")
    turns = [recorded_turn(conversation("q", "r")), recorded_turn(same), recorded_turn(same)]
    request = json.loads(json.dumps(same))
    request["messages"][1]["content"] = "changed"
    assert nearest_turn(turns, candidates, PROTOCOL, request) == 1
