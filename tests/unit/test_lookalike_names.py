"""Names that look alike: a Cyrillic letter or an invisible character in a name is shown by
code point wherever two names are told apart, and a look-alike is never proposed.

The names are written with escapes here on purpose: the look-alike letters would print (and
read in review) exactly like the Latin ones.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.assertions import evaluate
from flowproof_cli.cassette import Turn
from flowproof_cli.cassette.diff import contrast, side_by_side
from flowproof_cli.cassette.divergence import explain
from flowproof_cli.errors import SpecError
from flowproof_cli.evidence.trajectory_diff import diff_traces
from flowproof_cli.mcp.lane import Call
from flowproof_cli.mcp.matching import compare_call
from flowproof_cli.quoting import (
    closest_name,
    code_point,
    looks_alike,
    named,
    odd_characters,
    skeleton,
    unmasked,
)
from flowproof_cli.runner.tool_warnings import look_alike_warnings, unintercepted_tool_warnings
from flowproof_cli.spec import load_spec, parse_spec
from flowproof_cli.trajectory import AssistantTurn, ToolCall, Trajectory
from tests.conftest import REPO, run_cli
from tests.unit.trace_builders import TIME, chat_trace, tool

CYRILLIC_A = "\u0430"
ZERO_WIDTH = "\u200b"
#: `get_weather` with its second `a` Cyrillic, and with a zero-width space after `get_`.
CYRILLIC = f"get_we{CYRILLIC_A}ther"
INVISIBLE = f"get_{ZERO_WIDTH}weather"
CYRILLIC_NOTE = "U+0430 CYRILLIC SMALL LETTER A at char 6, which looks like `a`"
INVISIBLE_NOTE = "U+200B ZERO WIDTH SPACE at char 4, which is invisible"
LOOK_ALIKES = [
    pytest.param(CYRILLIC, "get_we\\u0430ther", CYRILLIC_NOTE, id="cyrillic"),
    pytest.param(INVISIBLE, "get_\\u200bweather", INVISIBLE_NOTE, id="zero-width"),
]


def _odd_free(text: str) -> bool:
    """No look-alike or invisible character of these tests anywhere in `text`."""
    return CYRILLIC_A not in text and ZERO_WIDTH not in text


# -- the reproduction: the example flow with a look-alike tool name, on the real CLI ----


@pytest.mark.slow
@pytest.mark.parametrize(("name", "escaped", "note"), LOOK_ALIKES)
def test_run_shows_the_look_alike_by_code_point_and_never_proposes_it(
    tmp_path: Path, name: str, escaped: str, note: str
) -> None:
    example = REPO / "examples" / "agent-demo" / "weather.flow.yaml"
    text = example.read_text(encoding="utf-8")
    spec = tmp_path / "weather.flow.yaml"
    spec.write_text(
        text.replace("assert_tool_call: get_weather where", f"assert_tool_call: {name} where"),
        encoding="utf-8",
    )
    result = run_cli("run", spec)
    assert result.code == 2, result.output
    assert result.stderr == (
        f"error: {spec}:12: `assert_tool_call` names tool `{escaped}` ({note}), which is not "
        "declared under `tools`: it only looks like the declared `get_weather`. Fix: write the "
        "name as `get_weather`\n"
    )
    assert _odd_free(result.output)


# -- the spec: a step, a declared tool -----------------------------------------------------------

HEAD = "name: n\napp: agent\nagent:\n  command: run\n"


def _spec_error(tools: list[str], step: str) -> SpecError:
    listed = "".join(f"  - name: {json.dumps(tool)}\n" for tool in tools)
    text = f"{HEAD}tools:\n{listed}steps:\n  - prompt: hi\n  - {step}\n"
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "t.flow.yaml")
    return caught.value


@pytest.mark.parametrize(("name", "escaped", "note"), LOOK_ALIKES)
@pytest.mark.parametrize("kind", ["assert_tool_call", "assert_no_tool_call"])
def test_a_step_naming_a_look_alike_of_a_declared_tool(
    kind: str, name: str, escaped: str, note: str
) -> None:
    error = _spec_error(["get_time", "get_weather"], f"{kind}: {json.dumps(name)}")
    assert error.detail == (
        f"`{kind}` names tool `{escaped}` ({note}), which is not declared under `tools`: it "
        "only looks like the declared `get_weather`. Fix: write the name as `get_weather`"
    )
    assert _odd_free(error.detail)


def test_a_declared_look_alike_is_shown_and_the_plain_name_proposed() -> None:
    error = _spec_error(["get_time", CYRILLIC], "assert_tool_call: get_weather")
    assert error.detail == (
        "`assert_tool_call` names tool `get_weather`, which is not declared under `tools`: it "
        f"only looks like the declared `get_we\\u0430ther` ({CYRILLIC_NOTE}). Fix: write the "
        "name under `tools` as `get_weather`"
    )


def test_an_undeclared_look_alike_proposes_its_plain_spelling_to_declare() -> None:
    error = _spec_error(["get_time"], f"assert_tool_call: {json.dumps(CYRILLIC)}")
    assert error.detail == (
        f"`assert_tool_call` names tool `get_we\\u0430ther` ({CYRILLIC_NOTE}), which is not "
        "declared under `tools` (declared: get_time). Fix: write it as `get_weather` and add "
        "`- name: get_weather` under `tools`, or correct the tool name"
    )
    assert _odd_free(error.detail)


def test_a_plain_undeclared_name_still_proposes_declaring_it() -> None:
    error = _spec_error(["get_time"], "assert_tool_call: get_weather")
    assert error.detail == (
        "`assert_tool_call` names tool `get_weather`, which is not declared under `tools` "
        "(declared: get_time). Fix: add `- name: get_weather` under `tools`, or correct the "
        "tool name"
    )


def test_two_declared_tools_that_look_alike_are_refused_at_the_second(tmp_path: Path) -> None:
    path = tmp_path / "t.flow.yaml"
    path.write_text(
        HEAD
        + textwrap.dedent(
            f"""\
            tools:
              - name: get_weather
                result: sunny
              - name: "{CYRILLIC}"
                result: rain
            steps:
              - prompt: hi
            """
        ),
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.line == 8
    assert caught.value.detail == (
        f"tool `get_we\\u0430ther` ({CYRILLIC_NOTE}) under `tools` only looks like "
        "`get_weather` (entry 1): the two are different names, so a call, a mock or an "
        "assertion meant for one never applies to the other. Fix: keep one entry, named "
        "`get_weather`"
    )


# -- the verdict: an assertion against the calls the agent made ----------------------------------


def _verdict(step: str, *called: str) -> str:
    text = f"{HEAD}steps:\n  - prompt: hi\n  - {step}\n"
    spec = parse_spec(text, "t.flow.yaml")
    calls = [ToolCall(name=name, raw_arguments="{}", turn=1) for name in called]
    trajectory = Trajectory(
        turns=[
            AssistantTurn(turn=1, text=None, tool_calls=tuple(calls)),
            AssistantTurn(turn=2, text="done", tool_calls=()),
        ]
    )
    (failure,) = evaluate(spec, trajectory, {})
    return failure.message


def _verdict_ends(verdict: list[str], end: str) -> None:
    """The verdict `_verdict(*verdict)` gives ends with `end`, every odd name spelt out."""
    message = _verdict(*verdict)
    assert message.endswith(end)
    assert _odd_free(message)


def test_an_assertion_naming_a_look_alike_of_the_call_made() -> None:
    _verdict_ends(
        [f"assert_tool_call: {json.dumps(CYRILLIC)}", "get_time", "get_weather"],
        f": get_we\\u0430ther ({CYRILLIC_NOTE}) was never called; the agent called "
        "get_weather, which only looks like it. Fix: write the name as `get_weather`",
    )


def test_a_call_of_a_look_alike_is_shown_by_code_point() -> None:
    _verdict_ends(
        ["assert_tool_call: get_weather", "get_time", INVISIBLE],
        f": get_weather was never called; the agent called get_\\u200bweather ({INVISIBLE_NOTE}), "
        "which only looks like it (the model named a tool that is not the one asserted)",
    )


def test_the_called_list_spells_out_odd_names() -> None:
    _verdict_ends(
        ["assert_tool_call: delete_city", "get_time", INVISIBLE],
        "delete_city was never called; tools called, in order: get_time, get_\\u200bweather. "
        "Check the tool name and the prompt",
    )


# -- divergence: two requests told apart ---------------------------------------------------------


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def _request(*tools: str, content: str = "weather in Nairobi?") -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": content}],
        "tools": [_tool(name) for name in tools],
    }


def _divergence(recorded: dict[str, Any], replayed: dict[str, Any]) -> str:
    turn = Turn("openai-chat", recorded, 200, {"choices": []})
    return explain(1, turn, "openai-chat", replayed).message


def test_a_tool_offered_under_a_look_alike_name() -> None:
    message = _divergence(_request("get_time", "get_weather"), _request("get_time", CYRILLIC))
    assert message == (
        "turn 1: tools offered changed: added get_we\\u0430ther; removed get_weather\n"
        f"  get_we\\u0430ther ({CYRILLIC_NOTE}) only looks like get_weather\n"
        "  recorded: ['get_time', 'get_weather']\n"
        "  replayed: ['get_time', 'get_we\\u0430ther']"
    )
    assert _odd_free(message)


def test_message_content_that_differs_by_a_look_alike_letter() -> None:
    message = _divergence(
        _request("get_time"), _request("get_time", content=f"we{CYRILLIC_A}ther in Nairobi?")
    )
    assert message == (
        "turn 1: message 0 (user) content changed\n"
        "  recorded: weather in Nairobi?\n"
        "  replayed: we\\u0430ther in Nairobi? (U+0430 CYRILLIC SMALL LETTER A at char 2, "
        "which looks like `a`)"
    )


def test_a_recorded_look_alike_replaced_by_the_plain_name() -> None:
    message = _divergence(_request("get_time", INVISIBLE), _request("get_time", "get_weather"))
    assert message.splitlines()[:2] == [
        "turn 1: tools offered changed: added get_weather; removed get_\\u200bweather",
        f"  get_weather only looks like get_\\u200bweather ({INVISIBLE_NOTE})",
    ]


def test_a_tool_call_renamed_in_the_history() -> None:
    def with_call(name: str) -> dict[str, Any]:
        request = _request("get_weather")
        call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}
        request["messages"].append({"role": "assistant", "content": None, "tool_calls": [call]})
        return request

    message = _divergence(with_call("get_weather"), with_call(INVISIBLE))
    assert message == (
        "turn 1: tool-call arguments drifted in message 1 (assistant): tool call changed: "
        f"recorded get_weather, replayed get_\\u200bweather ({INVISIBLE_NOTE})"
    )


def test_contrast_of_long_text_names_the_odd_character() -> None:
    recorded = "x" * 200 + "weather"
    replayed = "x" * 200 + f"we{CYRILLIC_A}ther"
    (line,) = contrast(recorded, replayed)
    assert line.endswith(
        "(replayed has U+0430 CYRILLIC SMALL LETTER A at char 202, which looks like `a`)"
    )
    assert side_by_side(recorded, replayed)[-1].endswith(
        "(replayed has U+0430 CYRILLIC SMALL LETTER A at char 202, which looks like `a`)"
    )


def test_plain_differences_are_worded_as_before() -> None:
    assert contrast("get_weather", "get_time") == ["recorded get_weather, replayed get_time"]
    assert contrast("caf\u00e9", "cafe") == [
        "recorded caf\u00e9 (U+00E9 LATIN SMALL LETTER E WITH ACUTE at char 3), replayed cafe"
    ]


def test_an_mcp_call_of_a_look_alike_tool() -> None:
    recorded = Call(method="tools/call", params={"name": "read_file", "arguments": {}})
    replayed = {"name": "read_f\u0456le", "arguments": {}}
    message = compare_call(recorded, "tools/call", replayed)
    assert message == (
        "tool: recorded read_file, replayed read_f\\u0456le (U+0456 CYRILLIC SMALL LETTER "
        "BYELORUSSIAN-UKRAINIAN I at char 6, which looks like `i`)"
    )


# -- did you mean: never a suggestion that looks like what was typed -----------------------------


def test_an_unknown_key_that_looks_like_a_known_one(tmp_path: Path) -> None:
    path = tmp_path / "t.flow.yaml"
    path.write_text(f"{HEAD}st\u0435ps:\n  - prompt: hi\n", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    detail = caught.value.detail
    assert "unknown key `st\\u0435ps` (U+0435 CYRILLIC SMALL LETTER IE at char 2, which looks " in (
        detail
    )
    assert "Did you mean `steps`?" in detail
    assert "\u0435" not in detail


# -- the helpers -----------------------------------------------------------------------------------


def test_skeleton_and_look_alikes() -> None:
    assert skeleton(CYRILLIC) == skeleton(INVISIBLE) == "get_weather"
    assert skeleton("\uff47\uff45\uff54") == "get"  # fullwidth, by NFKC
    assert looks_alike(CYRILLIC, "get_weather") and looks_alike(INVISIBLE, CYRILLIC)
    assert not looks_alike("get_weather", "get_weather")
    assert not looks_alike("get_weather", "get_wheather")
    assert not looks_alike("caf\u00e9", "cafe")  # an accent is visible


def test_unmasked_escapes_only_what_hides_and_code_points_name_it() -> None:
    assert unmasked("get_weather") == "get_weather"
    assert unmasked(CYRILLIC) == "get_we\\u0430ther"
    assert unmasked(INVISIBLE) == "get_\\u200bweather"
    assert unmasked("a\U0001d41a\x1b") == "a\\U0001d41a\\x1b"  # mathematical bold a; ESC
    assert unmasked("caf\u00e9 \u6771\u4eac") == "caf\u00e9 \u6771\u4eac"  # visible: kept
    assert code_point(CYRILLIC_A) == "U+0430 CYRILLIC SMALL LETTER A"
    assert code_point("\U000e0041") == "U+E0041 TAG LATIN CAPITAL LETTER A"
    assert code_point("\x01") == "U+0001"


def test_odd_characters_lists_only_where_the_names_differ_and_caps() -> None:
    assert odd_characters(CYRILLIC, "get_weather") == [CYRILLIC_NOTE]
    assert odd_characters("caf\u00e9 caf\u00e9", "caf\u00e9 cafe") == [
        "U+00E9 LATIN SMALL LETTER E WITH ACUTE at char 8"
    ]
    many = "\u0430" * 8
    assert odd_characters(many, "a" * 8)[-1] == "3 more"
    long_old, long_new = "x" * 1000 + "a" + "y" * 1000, "x" * 1000 + "\u0430" + "y" * 1000
    assert odd_characters(long_new, long_old) == [
        "U+0430 CYRILLIC SMALL LETTER A at char 1000, which looks like `a`"
    ]
    assert named("get_weather", "get_time") == "get_weather"
    assert named(INVISIBLE, "get_weather") == f"get_\\u200bweather ({INVISIBLE_NOTE})"


def test_closest_name_sees_through_look_alikes() -> None:
    assert closest_name(CYRILLIC, ["get_time", "get_weather"]) == "get_weather"
    assert closest_name(f"get_wea{ZERO_WIDTH}thr", ["get_time", "get_weather"]) == "get_weather"
    assert closest_name("zzz", ["get_time", "get_weather"]) is None


def test_a_re_record_that_calls_and_offers_a_look_alike() -> None:
    look_alike = (CYRILLIC, '{"city": "Nairobi"}')
    new = chat_trace(calls=(look_alike, TIME), tools=[tool(CYRILLIC), tool("get_time")])
    result = diff_traces(chat_trace(), new).lines()
    assert result[:4] == [
        "what the agent did differently:",
        "  tool calls: get_weather, get_time -> get_we\\u0430ther, get_time",
        "    - get_weather: call 1, no longer made",
        f"    + get_we\\u0430ther ({CYRILLIC_NOTE}): call 1, new",
    ]
    assert "  tools offered:" in result
    assert f"    + get_we\\u0430ther ({CYRILLIC_NOTE})" in result
    assert "    - get_weather" in result


# -- a look-alike nothing can match: said on every run ---------------------------------------------


def test_a_forbidden_look_alike_is_warned_about_since_it_can_never_fail() -> None:
    """`assert_no_tool_call` with a Cyrillic letter in the name passes whatever the agent
    calls (no call can have that name by accident): the run says so, every time."""
    spec = parse_spec(
        f"{HEAD}steps:\n  - prompt: hi\n  - assert_no_tool_call: delete_\u0441ity\n", "t.flow.yaml"
    )
    note = (
        "tool `delete_\\u0441ity` (U+0441 CYRILLIC SMALL LETTER ES at char 7, which looks like "
        "`c`) in `assert_no_tool_call` (line 7) is not `delete_city`: a call of `delete_city` "
        "never matches it. Fix: write it as `delete_city`"
    )
    assert look_alike_warnings(spec) == [f"warning: {note}"]
    trajectory = Trajectory(
        turns=[AssistantTurn(turn=1, text=None, tool_calls=(ToolCall("delete_city", "{}", 1),))]
    )
    assert evaluate(spec, trajectory, {}) == []  # the verdict itself cannot see it


def test_a_mocked_look_alike_is_warned_about_and_plain_or_foreign_names_are_not() -> None:
    tools = f'  - name: "{INVISIBLE}"\n    result: sunny\n  - name: get_time\n'
    tools += "  - name: \u043f\u043e\u0433\u043e\u0434\u0430\n"  # a Cyrillic name, all of it
    spec = parse_spec(f"{HEAD}tools:\n{tools}steps:\n  - prompt: hi\n", "t.flow.yaml")
    assert look_alike_warnings(spec) == [
        f"warning: tool `get_\\u200bweather` ({INVISIBLE_NOTE}) in `tools` is not `get_weather`: "
        "a call of `get_weather` never matches it. Fix: write it as `get_weather`"
    ]


@pytest.mark.parametrize(("name", "escaped", "note"), LOOK_ALIKES)
def test_a_mocked_or_forbidden_look_alike_gets_no_advice_to_declare_it(
    name: str, escaped: str, note: str
) -> None:
    """The warning for a tool nothing intercepts printed the look-alike as it is (reading as
    `get_weather`) and told the user to declare it under `mcp:`: it proposed the look-alike.
    No call can have that name, so nothing runs for real under it; the look-alike warning
    alone speaks for it, with its code points and the plain name. A plain mocked tool beside
    it keeps its warning."""
    tools = f"  - name: {json.dumps(name)}\n    result: sunny\n  - name: get_time\n    result: x\n"
    steps = f"  - prompt: hi\n  - assert_no_tool_call: {json.dumps(name)}\n"
    spec = parse_spec(f"{HEAD}tools:\n{tools}steps:\n{steps}", "t.flow.yaml")
    said = unintercepted_tool_warnings(spec)
    assert len(said) == 1, said
    assert said[0].startswith("warning: tool `get_time` is mocked under `tools:`")
    alike = look_alike_warnings(spec)  # one for `tools`, one for the step
    assert len(alike) == 2
    assert all(f"`{escaped}` ({note})" in warning and _odd_free(warning) for warning in alike)
