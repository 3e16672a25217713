"""Honest warnings: every mocked or forbidden tool that nothing intercepts is named."""

from __future__ import annotations

import textwrap

from flowproof_cli.runner.tool_warnings import PREFIX, unintercepted_tool_warnings
from flowproof_cli.spec import FlowSpec, parse_spec


def spec(tools: str = "", steps: str = "") -> FlowSpec:
    text = textwrap.dedent(
        """\
        name: n
        app: agent
        agent: {command: python agent.py}
        """
    )
    if tools:
        text += "tools:\n" + textwrap.indent(textwrap.dedent(tools), "  ")
    text += "steps:\n  - prompt: go\n" + textwrap.indent(textwrap.dedent(steps), "  ")
    return parse_spec(text, "t.flow.yaml")


def test_a_declared_tool_that_is_neither_mocked_nor_forbidden_is_not_warned_about() -> None:
    flow = spec(tools="- name: get_weather\n", steps="- assert_tool_call: get_weather\n")
    assert unintercepted_tool_warnings(flow) == []


def test_no_tools_no_warnings() -> None:
    assert unintercepted_tool_warnings(spec()) == []


def test_a_mocked_tool_warns_that_it_still_runs_for_real() -> None:
    flow = spec(tools="- name: get_time\n  result: {now: x}\n")
    (warning,) = unintercepted_tool_warnings(flow)
    assert warning == (
        "warning: tool `get_time` is mocked under `tools:`, but nothing intercepts it: the "
        "agent still runs get_time for real (the mock only changes what the model is told it "
        "returned). To stop the real call, declare get_time under `mcp:` with a `result:` so "
        "flowproof answers it instead of the real tool"
    )


def test_a_null_result_is_a_mock_too() -> None:
    flow = spec(tools="- name: ping\n  result: null\n")
    (warning,) = unintercepted_tool_warnings(flow)
    assert "tool `ping` is mocked" in warning


def test_a_forbidden_tool_warns_that_a_call_would_run_for_real() -> None:
    flow = spec(
        tools="- name: delete_city\n",
        steps="- assert_no_tool_call: delete_city where city equals Paris\n",
    )
    (warning,) = unintercepted_tool_warnings(flow)
    assert warning.startswith(
        "warning: tool `delete_city` is forbidden by `assert_no_tool_call`, but nothing "
        "intercepts it: if the agent calls delete_city, it runs for real before the flow fails"
    )
    assert "declare delete_city under `mcp:` with a `result:`" in warning


def test_a_forbidden_tool_without_a_tools_list_warns_too() -> None:
    flow = spec(steps="- assert_no_tool_call: transfer\n- assert_no_tool_call: transfer\n")
    (warning,) = unintercepted_tool_warnings(flow)
    assert "tool `transfer` is forbidden" in warning


def test_mocked_and_forbidden_is_one_warning() -> None:
    flow = spec(
        tools="- name: send_email\n  result: sent\n",
        steps="- assert_no_tool_call: send_email where to contains @evil\n",
    )
    (warning,) = unintercepted_tool_warnings(flow)
    assert "tool `send_email` is mocked under `tools:` and forbidden by" in warning


def test_one_warning_per_tool_mocks_first_all_prefixed() -> None:
    flow = spec(
        tools="- name: a\n  result: 1\n- name: b\n- name: c\n  result: 2\n",
        steps="- assert_no_tool_call: b\n",
    )
    warnings = unintercepted_tool_warnings(flow)
    assert [w.split("`")[1] for w in warnings] == ["a", "c", "b"]
    assert all(w.startswith(PREFIX) for w in warnings)


def test_intercepted_tools_are_not_warned_about() -> None:
    flow = spec(
        tools="- name: a\n  result: 1\n- name: b\n",
        steps="- assert_no_tool_call: b\n",
    )
    assert unintercepted_tool_warnings(flow, intercepted_tools={"a", "b"}) == []
    (warning,) = unintercepted_tool_warnings(flow, intercepted_tools={"a"})
    assert "tool `b` is forbidden" in warning


def test_a_tool_answered_by_an_mcp_mock_is_not_warned_about() -> None:
    flow = parse_spec(
        textwrap.dedent(
            """\
            name: n
            app: agent
            agent: {command: python agent.py}
            mcp:
              - name: exports
                command: python server.py
                tools:
                  - name: export_rows
                    result: {ok: false}
            steps:
              - prompt: go
              - assert_no_tool_call: export_rows
              - assert_no_tool_call: delete_city
            """
        ),
        "t.flow.yaml",
    )
    warnings = unintercepted_tool_warnings(flow)
    assert len(warnings) == 1
    assert "delete_city" in warnings[0] and "export_rows" not in warnings[0]
