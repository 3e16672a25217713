"""Divergence reports: coarse-to-fine one-line answers, and the nearest recorded turn."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.cassette import Turn
from flowproof_cli.cassette.diff import (
    FieldChange,
    changes,
    contrast,
    field_changes,
    first_difference,
    line_diff,
    show,
    window,
)
from flowproof_cli.cassette.divergence import CHECKS, Compared, Divergence, explain, nearest_turn
from flowproof_cli.verdict import FlowResult
from tests.unit.trace_builders import tool_round

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
            *tool_round("call_1", "get_weather", '{"city": "Nairobi"}', '{"temp":21}'),
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


def test_long_multi_line_content_shows_the_changed_line() -> None:
    """Text too long to show whole is shown as the changed line, not as two equal prefixes."""
    recorded = base_request()
    recorded["messages"][0]["content"] = "line one\n" + "a" * 400
    request = copy.deepcopy(recorded)
    request["messages"][0]["content"] = "line one\n" + "b" * 400
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == "turn 1: message 0 (system) content changed"
    assert divergence.details == (
        "differs at line 2 of 2",
        "  1  line one",
        "- 2  " + "a" * 64 + "...",
        "+ 2  " + "b" * 64 + "...",
    )


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


# --- long values: the place they differ, not their first characters ------------------------

LONG_SYSTEM = (
    "You are a coding agent. "
    + "Read the files before you edit them. " * 50
    + "Today's date is 2026-11-30. Be brief."
)  # 1911 characters; "brief" starts at 1905
USER_ID = "user_" + "ab12" * 16 + "_account__session_5f1c2e0a-0000-4000-8000-000000000001"


def anthropic_request(system: Any = None) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        "system": system if system is not None else [{"type": "text", "text": LONG_SYSTEM}],
        "messages": [{"role": "user", "content": "Fix the bug."}],
        "metadata": {"user_id": USER_ID},
    }


def explain_in(protocol: str, recorded: dict[str, Any], request: dict[str, Any]) -> Divergence:
    return explain(1, Turn(protocol, recorded, 200, {}), protocol, request)


def test_long_anthropic_system_block_edited_at_its_end() -> None:
    recorded = anthropic_request()
    request = copy.deepcopy(recorded)
    request["system"][0]["text"] = LONG_SYSTEM.replace("brief", "terse")
    divergence = explain_in("anthropic", recorded, request)
    assert divergence.message == (
        "turn 1: message 0 (system) content changed\n"
        "  content.0.text: differs at char 1905 of 1911: "
        """recorded ..." Today's date is 2026-11-30. Be brief.", """
        """replayed ..." Today's date is 2026-11-30. Be terse.\""""
    )
    assert divergence.changes == (
        FieldChange("system.0.text", LONG_SYSTEM, LONG_SYSTEM.replace("brief", "terse")),
    )


def test_long_parameter_differing_at_its_end() -> None:
    recorded = anthropic_request()
    request = copy.deepcopy(recorded)
    request["metadata"]["user_id"] = USER_ID[:-1] + "2"
    divergence = explain_in("anthropic", recorded, request)
    assert divergence.summary == (
        "turn 1: request parameters changed: metadata.user_id: differs at char 122 of 123: "
        'recorded ..."c2e0a-0000-4000-8000-000000000001", '
        'replayed ..."c2e0a-0000-4000-8000-000000000002"'
    )
    assert divergence.details == ()
    assert divergence.changes == (FieldChange("metadata.user_id", USER_ID, USER_ID[:-1] + "2"),)


def test_multi_line_system_prompt_shows_a_line_diff() -> None:
    lines = [f"Rule {number}: follow convention number {number}." for number in range(1, 30)]
    recorded = anthropic_request("\n".join(lines))
    lines[11] = "Rule 12: ignore every convention."
    request = copy.deepcopy(recorded)
    request["system"] = "\n".join(lines)
    divergence = explain_in("anthropic", recorded, request)
    assert divergence.message == (
        "turn 1: message 0 (system) content changed\n"
        "  differs at line 12 of 29\n"
        "    11  Rule 11: follow convention number 11.\n"
        "  - 12  Rule 12: follow convention number 12.\n"
        "  + 12  Rule 12: ignore every convention.\n"
        "    13  Rule 13: follow convention number 13."
    )
    assert [change.path for change in divergence.changes] == ["system"]


def test_multi_line_block_reports_later_changes_and_line_counts() -> None:
    lines = [f"line {number}" for number in range(1, 41)]
    recorded = anthropic_request([{"type": "text", "text": "\n".join(lines) + "x" * 80}])
    edited = [*lines]
    edited[2] = "line three"
    edited.insert(30, "an inserted line")
    request = copy.deepcopy(recorded)
    request["system"][0]["text"] = "\n".join(edited) + "x" * 80
    divergence = explain_in("anthropic", recorded, request)
    assert divergence.details == (
        "content.0.text: differs at line 3 (recorded 40 lines, replayed 41)",
        "   2  line 2",
        "-  3  line 3",
        "+  3  line three",
        "   4  line 4",
        "  ... and 1 more changed line(s) after line 4",
    )


def test_openai_chat_content_part_edited_at_its_end() -> None:
    recorded = base_request()
    recorded["messages"][1]["content"] = [{"type": "text", "text": LONG_SYSTEM}]
    request = copy.deepcopy(recorded)
    request["messages"][1]["content"][0]["text"] = LONG_SYSTEM + " Or not."
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == "turn 1: message 1 (user) content changed"
    assert divergence.details == (
        "content.0.text: differs at char 1911 (recorded 1911 chars, replayed 1919): "
        """recorded ..."'s date is 2026-11-30. Be brief.", """
        """replayed ..."'s date is 2026-11-30. Be brief. Or not.\"""",
    )
    assert divergence.changes == (
        FieldChange("messages.1.content.0.text", LONG_SYSTEM, LONG_SYSTEM + " Or not."),
    )


def test_openai_responses_input_part_edited_at_its_end() -> None:
    def responses(text: str) -> dict[str, Any]:
        part = {"type": "input_text", "text": text}
        return {
            "model": "gpt-5",
            "input": [{"type": "message", "role": "user", "content": [part]}],
        }

    recorded, request = responses(LONG_SYSTEM), responses(LONG_SYSTEM.replace("brief", "terse"))
    divergence = explain_in("openai-responses", recorded, request)
    assert divergence.summary == "turn 1: message 0 (user) content changed"
    assert divergence.details == (
        "content.0.text: differs at char 1905 of 1911: "
        """recorded ..." Today's date is 2026-11-30. Be brief.", """
        """replayed ..." Today's date is 2026-11-30. Be terse.\"""",
    )
    assert [change.path for change in divergence.changes] == ["input.0.content.0.text"]


def test_gemini_part_edited_at_its_end() -> None:
    def gemini(text: str) -> dict[str, Any]:
        return {
            "model": "gemini-2.5-flash",
            "contents": [{"role": "user", "parts": [{"text": "Hello"}, {"text": text}]}],
        }

    recorded, request = gemini(LONG_SYSTEM), gemini(LONG_SYSTEM.replace("brief", "terse"))
    divergence = explain_in("gemini", recorded, request)
    assert divergence.message == (
        "turn 1: message 0 (user) content changed\n"
        "  content.1.text: differs at char 1905 of 1911: "
        """recorded ..." Today's date is 2026-11-30. Be brief.", """
        """replayed ..." Today's date is 2026-11-30. Be terse.\""""
    )
    assert divergence.changes[0].path == "contents.0.parts.1.text"


def test_long_plain_message_text_shows_aligned_windows() -> None:
    recorded = base_request()
    recorded["messages"][1]["content"] = LONG_SYSTEM
    request = copy.deepcopy(recorded)
    request["messages"][1]["content"] = LONG_SYSTEM.replace("brief", "terse")
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.details == (
        "differs at char 1905 of 1911",
        """recorded: ..." Today's date is 2026-11-30. Be brief.\"""",
        """replayed: ..." Today's date is 2026-11-30. Be terse.\"""",
    )


def test_plain_message_text_up_to_300_characters_is_shown_whole() -> None:
    recorded = base_request()
    recorded["messages"][1]["content"] = "a" * 299 + "b"
    request = copy.deepcopy(recorded)
    request["messages"][1]["content"] = "a" * 299 + "c"
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.details == ("recorded: " + "a" * 299 + "b", "replayed: " + "a" * 299 + "c")


def test_long_tool_description_change_in_a_declaration() -> None:
    recorded = base_request()
    recorded["tools"][0]["function"]["description"] = LONG_SYSTEM
    request = copy.deepcopy(recorded)
    request["tools"][0]["function"]["description"] = LONG_SYSTEM.replace("brief", "terse")
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.details == (
        "get_weather.function.description: differs at char 1905 of 1911: "
        """recorded ..." Today's date is 2026-11-30. Be brief.", """
        """replayed ..." Today's date is 2026-11-30. Be terse.\"""",
    )
    assert [change.path for change in divergence.changes] == ["tools.0.function.description"]


def test_long_argument_drift_shows_the_place() -> None:
    note = "x" * 100
    recorded = set_arguments(base_request(), json.dumps({"city": note + "1"}))
    request = set_arguments(copy.deepcopy(recorded), json.dumps({"city": note + "2"}))
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == (
        "turn 1: tool-call arguments drifted in message 2 (assistant): "
        f'get_weather.city: differs at char 100 of 101: recorded ..."{"x" * 32}1", '
        f'replayed ..."{"x" * 32}2"'
    )


def test_long_non_json_arguments_show_the_place() -> None:
    recorded = set_arguments(base_request(), "city=" + "N" * 100 + "airobi")
    request = set_arguments(copy.deepcopy(recorded), "city=" + "N" * 100 + "ice")
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == (
        "turn 1: tool-call arguments drifted in message 2 (assistant): "
        "get_weather arguments: differs at char 105 (recorded 111 chars, replayed 108): "
        f'recorded ..."{"N" * 32}airobi", replayed ..."{"N" * 32}ice"'
    )


def test_other_message_field_change_shows_the_place() -> None:
    recorded = base_request()
    recorded["messages"][3]["tool_call_id"] = "call_" + "7" * 90
    request = copy.deepcopy(recorded)
    request["messages"][3]["tool_call_id"] = "call_" + "7" * 89 + "8"
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == (
        "turn 1: message 3 (tool) changed: tool_call_id: differs at char 94 of 95: "
        f'recorded ..."{"7" * 33}", replayed ..."{"7" * 32}8"'
    )


def test_request_changed_fallback_shows_the_place() -> None:
    """An entry the outline skips (not an object) still diverges, with the place shown."""
    recorded = base_request()
    recorded["messages"].append("z" * 90 + "1")
    request = copy.deepcopy(recorded)
    request["messages"][-1] = "z" * 90 + "2"
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    assert divergence.summary == "turn 1: request changed"
    assert divergence.details == (
        f'messages.4: differs at char 90 of 91: recorded ..."{"z" * 32}1", '
        f'replayed ..."{"z" * 32}2"',
    )


def test_model_change_keeps_the_compact_form_and_its_field() -> None:
    request = base_request()
    request["model"] = "gpt-4o"
    divergence = explain_change(request)
    assert divergence.summary == "turn 1: model changed: recorded gpt-4o-mini, replayed gpt-4o"
    assert divergence.changes == (FieldChange("model", "gpt-4o-mini", "gpt-4o"),)


def test_every_branch_carries_its_changes() -> None:
    cases: list[tuple[dict[str, Any], list[tuple[str, str]]]] = []
    request = base_request()
    request["tools"].append(time_tool())
    cases.append((request, [("tools.1", "added")]))
    request = base_request()
    request["tools"] = []
    cases.append((request, [("tools.0", "removed")]))
    request = base_request()
    del request["messages"][3]
    cases.append((request, [("messages.3", "removed")]))
    request = base_request()
    request["temperature"] = 0.0  # 0 and 0.0 are different JSON
    cases.append((request, [("temperature", "changed")]))
    request = set_arguments(base_request(), '{"city":"Nairobi"}')
    cases.append((request, [("messages.2.tool_calls.0.function.arguments", "changed")]))
    for request, expected in cases:
        divergence = explain_change(request)
        assert [(change.path, change.kind) for change in divergence.changes] == expected
    protocol = explain(1, recorded_turn(protocol="anthropic"), PROTOCOL, {"model": "x"})
    assert {change.path for change in protocol.changes} == {
        "messages",
        "model",
        "temperature",
        "tools",
    }


def test_divergence_json_carries_full_values() -> None:
    recorded = anthropic_request()
    request = copy.deepcopy(recorded)
    request["system"][0]["text"] = LONG_SYSTEM.replace("brief", "terse")
    request["max_tokens"] = 2048
    payload = explain_in("anthropic", recorded, request).to_json()
    assert payload["turn"] == 1
    assert payload["summary"] == "turn 1: message 0 (system) content changed"
    assert payload["message"].startswith(payload["summary"] + "\n  content.0.text: differs at")
    assert payload["changes"] == [
        {"path": "max_tokens", "kind": "changed", "recorded": 1024, "replayed": 2048},
        {
            "path": "system.0.text",
            "kind": "changed",
            "recorded": LONG_SYSTEM,
            "replayed": LONG_SYSTEM.replace("brief", "terse"),
        },
    ]
    assert json.loads(json.dumps(payload)) == payload
    extra = Divergence(0, "extra call")
    assert extra.changes == ()
    assert extra.to_json()["changes"] == []


# --- diff helpers for long values -----------------------------------------------------------


def test_contrast_keeps_short_values_compact() -> None:
    assert contrast("a" * 79 + "b", "a" * 79 + "c") == [
        f"recorded {'a' * 79}b, replayed {'a' * 79}c"
    ]
    assert contrast({"k": "v"}, {"k": "w"}) == ['recorded {"k": "v"}, replayed {"k": "w"}']
    # A JSON value too long to show whole is shown where its JSON text differs, as a long
    # string is (cut to its start, the two would read alike).
    assert contrast({"k": "v" * 200}, {"k": "w"}) == [
        "differs at char 7 (recorded 209 chars, replayed 10): "
        f'recorded "{{"k": "{"v" * 57}"..., replayed "{{"k": "w"}}"'
    ]
    assert contrast("a" * 80 + "b", "a" * 80 + "c") == [
        f'differs at char 80 of 81: recorded ..."{"a" * 32}b", replayed ..."{"a" * 32}c"'
    ]


def test_window_near_the_start_shows_more_after_and_escapes() -> None:
    text = "\tTab first, then a long tail " + "t" * 100
    assert window(text, 1) == '"\\tTab first, then a long tail ' + "t" * 35 + '"...'
    assert window("short", 2) == '"short"'
    assert window("ab\rcd", 2, quote=False) == "ab\\rcd"
    assert first_difference("abc", "abd") == 2
    assert first_difference("ab", "abc") == 2


def test_line_diff_caps_a_large_change() -> None:
    old = "\n".join(f"old {n}" for n in range(20))
    new = "\n".join(f"new {n}" for n in range(20))
    assert line_diff(old, new) == [
        "differs at line 1 of 20",
        *(f"- {n + 1:>2}  old {n}" for n in range(4)),
        "  ... 16 more recorded line(s)",
        *(f"+ {n + 1:>2}  new {n}" for n in range(4)),
        "  ... 16 more replayed line(s)",
    ]


def test_line_diff_clips_long_lines_around_their_difference() -> None:
    old = "head\n" + "q" * 150 + "old tail"
    new = "head\n" + "q" * 150 + "new tail"
    assert line_diff(old, new) == [
        "differs at line 2 of 2",
        "  1  head",
        "- 2  ..." + "q" * 32 + "old tail",
        "+ 2  ..." + "q" * 32 + "new tail",
    ]


def test_changes_compare_json_types_and_sort_by_path() -> None:
    recorded = {"b": 1, "a": [1, 2], "c": {"x": True}}
    replayed = {"b": 1.0, "a": [1], "c": {"x": 1, "y": None}}
    assert changes(recorded, replayed) == [
        FieldChange("a.1", 2, None, "removed"),
        FieldChange("b", 1, 1.0),
        FieldChange("c.x", True, 1),
        FieldChange("c.y", None, None, "added"),
    ]
    assert changes([1], {"k": 1}, prefix="p") == [FieldChange("p", [1], {"k": 1})]
    assert changes("x", "y") == [FieldChange("(root)", "x", "y")]


def test_divergence_survives_a_result_json_round_trip() -> None:
    """A result read back from its JSON (--json, the run record) keeps the divergence whole."""
    recorded = anthropic_request()
    request = copy.deepcopy(recorded)
    request["metadata"]["user_id"] = USER_ID[:-1] + "2"
    result = FlowResult("f", Path("f.flow.yaml"), "replay", Path("f.trace.yaml"))
    result.divergence = explain_in("anthropic", recorded, request).to_json()
    back = FlowResult.from_json(json.loads(json.dumps(result.to_json())))
    assert back.divergence is not None
    assert back.divergence["changes"] == [
        {
            "path": "metadata.user_id",
            "kind": "changed",
            "recorded": USER_ID,
            "replayed": USER_ID[:-1] + "2",
        }
    ]


def _set_model(request: dict[str, Any]) -> None:
    request["model"] = "gpt-4o"


def _add_tool(request: dict[str, Any]) -> None:
    request["tools"].append(time_tool())


def _drop_last_message(request: dict[str, Any]) -> None:
    request["messages"].pop()


def _edit_user_message(request: dict[str, Any]) -> None:
    request["messages"][1]["content"] = "Weather in Lagos?"


def _set_temperature(request: dict[str, Any]) -> None:
    request["temperature"] = 1


def test_checks_run_coarse_to_fine() -> None:
    assert [check.__name__ for check in CHECKS] == [
        "_protocol",
        "_model",
        "_tools",
        "_shape",
        "_messages",
        "_parameters",
    ]


def test_no_check_finds_a_change_in_an_unchanged_request() -> None:
    compared = Compared(recorded_turn(), PROTOCOL, base_request())
    assert [check(compared) for check in CHECKS] == [None] * len(CHECKS)


@pytest.mark.parametrize(
    ("position", "edit", "summary"),
    [
        (1, _set_model, "model changed: recorded gpt-4o-mini, replayed gpt-4o"),
        (2, _add_tool, "tools offered changed: added get_time"),
        (3, _drop_last_message, "conversation shape changed"),
        (4, _edit_user_message, "message 1 (user) content changed"),
        (5, _set_temperature, "request parameters changed: temperature: recorded 0, replayed 1"),
    ],
)
def test_each_check_finds_its_own_change_and_the_coarser_ones_pass(
    position: int, edit: Any, summary: str
) -> None:
    request = base_request()
    edit(request)
    compared = Compared(recorded_turn(), PROTOCOL, request)
    found = [check(compared) for check in CHECKS[: position + 1]]  # the run stops there
    assert found[:position] == [None] * position
    report = found[position]
    assert report is not None
    assert report[0] == summary


def test_a_protocol_change_stops_before_any_outline() -> None:
    """The recorded turn's protocol is unknown: outlining it would fail, so no check after
    the protocol one may run."""
    compared = Compared(recorded_turn(protocol="no-such-api"), PROTOCOL, base_request())
    assert CHECKS[0](compared) == (
        "protocol changed: recorded no-such-api, replayed openai-chat",
        (),
    )
    with pytest.raises(KeyError, match="unknown protocol"):
        Compared(recorded_turn(), "no-such-api", base_request()).old
    assert explain(1, compared.recorded, PROTOCOL, base_request()).summary.startswith(
        "turn 1: protocol changed"
    )


UNITS = {
    "description": "The unit system of the temperatures in the answer: metric or imperial",
    "type": "string",
}


def test_a_property_added_to_a_tool_is_shown_whole_not_cut_at_80() -> None:
    # A CLI release adds a parameter to a tool: the added schema's `"type"` comes after its
    # description (keys sorted) and was cut at 80 characters (`"type": "stri...`).
    request = base_request()
    request["tools"][0]["function"]["parameters"]["properties"]["units"] = UNITS
    divergence = explain_change(request)
    assert divergence.summary == (
        "turn 1: tools offered changed: the declaration of get_weather changed"
    )
    assert divergence.details == (
        f"get_weather.function.parameters.properties.units: added in replay ({json.dumps(UNITS)})",
    )


def test_an_added_value_longer_than_message_text_is_clipped_there() -> None:
    long_units = {**UNITS, "description": "d" * 400}
    request = base_request()
    request["tools"][0]["function"]["parameters"]["properties"]["units"] = long_units
    (detail,) = explain_change(request).details
    assert detail.startswith("get_weather.function.parameters.properties.units: added in replay")
    assert detail.endswith("dddd...)") and len(detail) < 400


def test_a_long_json_value_changed_shows_where_it_differs() -> None:
    # A property's schema replaced by a list of schemas: both JSON texts are long; shown
    # as the place they differ, with the offset, not as two cuts of the same start.
    recorded = base_request()
    properties = recorded["tools"][0]["function"]["parameters"]["properties"]
    properties["units"] = {"anyOf": [UNITS, {"type": "null", "description": "no unit"}]}
    request = copy.deepcopy(recorded)
    properties = request["tools"][0]["function"]["parameters"]["properties"]
    properties["units"]["anyOf"] = {**UNITS, "nullable": True}
    divergence = explain(1, recorded_turn(recorded), PROTOCOL, request)
    (detail,) = divergence.details
    recorded_text = json.dumps([UNITS, {"type": "null", "description": "no unit"}])
    replayed_text = json.dumps({**UNITS, "nullable": True})
    assert detail.startswith(
        "get_weather.function.parameters.properties.units.anyOf: differs at char 0 "
        f"(recorded {len(recorded_text)} chars, replayed {len(replayed_text)}): "
    )
    assert '"type": "stri...' not in detail
