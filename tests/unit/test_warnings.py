"""Honest warnings: every mocked or forbidden tool that nothing intercepts is named, and so is
every `${flowproof.*}` handle flowproof does not fill (with the handle meant)."""

from __future__ import annotations

import textwrap

from flowproof_cli.cassette.turn import Turn
from flowproof_cli.runner.built_in_tools import built_in_of
from flowproof_cli.runner.tool_warnings import (
    PREFIX,
    handle_warnings,
    unintercepted_tool_warnings,
)
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


# --- built-in tools: what stops the real call ---------------------------------------------


def anthropic_turn(*tools: str) -> Turn:
    """A Claude Code-like request offering these tools."""
    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": name, "input_schema": {"type": "object"}} for name in tools],
    }
    return Turn("anthropic", request, 200, {})


def gemini_turn(*tools: str) -> Turn:
    request = {
        "model": "gemini-2.5-flash",
        "contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "tools": [{"functionDeclarations": [{"name": name} for name in tools]}],
    }
    return Turn("gemini", request, 200, {})


def chat_turn(*tools: str) -> Turn:
    request = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": name}} for name in tools],
    }
    return Turn("openai-chat", request, 200, {})


def responses_turn(*tools: str) -> Turn:
    request = {
        "model": "gpt-5.5",
        "input": [{"role": "user", "content": "go"}],
        "tools": [{"type": "function", "name": name} for name in tools],
    }
    return Turn("openai-responses", request, 200, {})


CLAUDE_CODE = anthropic_turn("Bash", "Read", "Edit", "Write", "Glob", "Grep", "mcp__notes__put")


def forbidding(*tools: str) -> FlowSpec:
    return spec(steps="".join(f"- assert_no_tool_call: {tool}\n" for tool in tools))


def test_a_cli_built_in_names_the_clis_own_flag_not_mcp() -> None:
    (warning,) = unintercepted_tool_warnings(forbidding("Bash"), turns=[CLAUDE_CODE])
    assert warning == (
        "warning: tool `Bash` is forbidden by `assert_no_tool_call`, but nothing intercepts "
        "it: if the agent calls Bash, it runs for real before the flow fails. Bash is a "
        "built-in tool of Claude Code (the tools the agent's model requests offer show it is "
        "Claude Code, and no MCP server of the spec provides Bash), so it cannot be declared "
        "under `mcp:`. To stop the real call, deny it with Claude Code's own permissions: "
        "`--disallowedTools Bash` (or leave it out of `--tools`)"
    )
    # Gemini CLI run headless leaves its shell out of the requests: still its built-in
    gemini = gemini_turn("read_file", "list_directory", "glob", "grep_search")
    (warning,) = unintercepted_tool_warnings(forbidding("run_shell_command"), turns=[gemini])
    assert "run_shell_command is a built-in tool of Gemini CLI" in warning
    assert '`toolName = "run_shell_command"`, `decision = "deny"`, given with `--policy' in (
        warning
    )
    codex = responses_turn("exec_command", "write_stdin", "apply_patch", "update_plan")
    (warning,) = unintercepted_tool_warnings(forbidding("exec_command"), turns=[codex])
    assert "exec_command is a built-in tool of Codex" in warning
    assert "`--sandbox read-only`" in warning
    assert "under `mcp:` with" not in warning


def test_a_tool_that_may_come_from_an_mcp_server_keeps_the_mcp_advice() -> None:
    """Not offered in any request seen (or none was made), or provided by a server of the
    spec: it could be declared under `mcp:`."""
    advice = "To stop the real call, declare {} under `mcp:` with a `result:`"
    (warning,) = unintercepted_tool_warnings(forbidding("send_email"), turns=[CLAUDE_CODE])
    assert advice.format("send_email") in warning
    (warning,) = unintercepted_tool_warnings(forbidding("Bash"), turns=[chat_turn("a", "b")])
    assert advice.format("Bash") in warning  # the requests show no CLI that has it
    (warning,) = unintercepted_tool_warnings(forbidding("Bash"))  # no request seen
    assert advice.format("Bash") in warning
    flow = parse_spec(
        "name: n\napp: agent\nagent: {command: a}\nmcp:\n  - name: notes\n"
        "    command: s\n    tools: [{name: put}]\nsteps:\n  - prompt: go\n"
        "  - assert_no_tool_call: mcp__notes__put\n",
        "t.flow.yaml",
    )
    (warning,) = unintercepted_tool_warnings(flow, turns=[CLAUDE_CODE])
    assert advice.format("mcp__notes__put") in warning


def test_a_tool_an_mcp_server_listed_at_record_is_not_the_agents_own() -> None:
    from flowproof_cli.mcp.lane import Call, Lane

    lane = Lane(calls=[Call(method="tools/list", params={}, result={"tools": [{"name": "Bash"}]})])
    (warning,) = unintercepted_tool_warnings(
        forbidding("Bash"), turns=[CLAUDE_CODE], lanes={"shell": lane}
    )
    assert "declare Bash under `mcp:` with a `result:`" in warning


def test_the_agents_own_tool_outside_a_known_cli_says_so() -> None:
    """A framework's function tool, or a CLI not recognised (Qwen Code offers Gemini CLI's
    names over Chat Completions): turned off in the agent, or served from an MCP server."""
    for turn in (chat_turn("get_time", "get_weather"), chat_turn("run_shell_command", "read_file")):
        name = turn.request["tools"][0]["function"]["name"]
        (warning,) = unintercepted_tool_warnings(forbidding(name), turns=[turn])
        assert warning.endswith(
            f"{name} is one of the agent's own tools (offered in its model requests, "
            "and no MCP server of the spec provides it). To stop the real call, turn it off "
            "in the agent (a coding CLI's own permission flags or settings), or have the agent "
            "take it from an MCP server declared under `mcp:` with a `result:`, which "
            "flowproof answers instead of the real tool"
        ), warning


def test_one_built_in_name_alone_does_not_make_a_cli() -> None:
    (warning,) = unintercepted_tool_warnings(forbidding("Bash"), turns=[anthropic_turn("Bash")])
    assert "is one of the agent's own tools" in warning
    assert built_in_of("Bash", {"anthropic": {"Bash", "Read"}}) is not None
    assert built_in_of("Write", {"anthropic": {"Bash", "Read"}}) is not None  # not offered
    assert built_in_of("Bash", {"openai-chat": {"Bash", "Read"}}) is None


# --- `${flowproof.*}` handles flowproof does not fill ----------------------------------------


def agent_spec(agent: str, extra: str = "") -> FlowSpec:
    text = f"name: n\napp: agent\nagent:\n{textwrap.indent(textwrap.dedent(agent), '  ')}"
    return parse_spec(f"{text}{extra}steps:\n  - prompt: go\n", "t.flow.yaml")


def test_known_handles_give_no_warning() -> None:
    flow = agent_spec(
        """\
        command: agent -p ${flowproof.prompt} --mcp ${flowproof.mcp_server.notes}
        env: {A: "${flowproof.proxy_url}", B: "${flowproof.proxy_url_no_v1}", C: "${HOME}"}
        """,
        "mcp:\n  - name: notes\n    command: python server.py\n",
    )
    assert handle_warnings(flow) == []


def test_a_misspelt_handle_names_the_handle_meant() -> None:
    flow = agent_spec('command: gemini -p ${flowproof.promt}\nenv: {B: "${flowproof.proxy_ur}"}\n')
    assert handle_warnings(flow) == [
        "warning: agent.command uses `${flowproof.promt}`, which flowproof does not provide; "
        "did you mean `${flowproof.prompt}`? It is passed on as written",
        "warning: agent.env.B uses `${flowproof.proxy_ur}`, which flowproof does not provide; "
        "did you mean `${flowproof.proxy_url}`? It is passed on as written",
    ]
    assert all(warning.startswith(PREFIX) for warning in handle_warnings(flow))


def test_a_misspelt_mcp_server_name_names_the_declared_server() -> None:
    flow = agent_spec(
        'command: agent\nenv: {M: "${flowproof.mcp_url.note}"}\n',
        "mcp:\n  - name: notes\n    url: http://127.0.0.1:9/mcp\n",
    )
    (warning,) = handle_warnings(flow)
    assert "did you mean `${flowproof.mcp_url.notes}`?" in warning


def test_an_unknown_handle_lists_what_flowproof_provides() -> None:
    flow = agent_spec('command: agent\nenv: {M: "${flowproof.mcp_url.notes}"}\n')
    assert handle_warnings(flow) == [
        "warning: agent.env.M uses `${flowproof.mcp_url.notes}`, which flowproof does not "
        "provide (it provides ${flowproof.prompt}, ${flowproof.prompt_file}, "
        "${flowproof.proxy_url}, ${flowproof.proxy_url_no_v1} there; no MCP server `notes` is declared under `mcp:`); "
        "it is passed on as written"
    ]


def test_headers_get_only_the_proxy_handles() -> None:
    flow = agent_spec(
        """\
        url: http://127.0.0.1:9/run
        proxy_port: 4646
        headers: {X-Task: "${flowproof.prompt}", X-Base: "${flowproof.proxy_url}"}
        """
    )
    assert handle_warnings(flow) == [
        "warning: agent.headers.X-Task uses `${flowproof.prompt}`, which is filled in "
        "agent.command and agent.env only (headers may use ${flowproof.proxy_url}, "
        "${flowproof.proxy_url_no_v1}); it is sent as written"
    ]
