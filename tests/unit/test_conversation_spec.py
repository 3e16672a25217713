"""Conversation specs: `user:` steps grouped per turn, `agent.conversation`, simulated users,
and every way to write one wrong as a SpecError with file, line and fix (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.spec import (
    ConversationSpec,
    FlowSpec,
    ReplyStep,
    SimulatedUser,
    UserStep,
    load_spec,
    spec_json_schema,
)
from flowproof_cli.spec.variables import MESSAGE_HANDLE, MESSAGE_JSON_HANDLE
from tests.conftest import run_cli
from tests.unit.test_spec_loader import write

COMMAND = """\
name: n
app: agent
agent:
  command: python bot.py
"""
UNTIL = "  conversation:\n    until: '^> $'\n"

SUPPORT_BOT = """\
name: Support bot cancels the order it was told about earlier
app: agent
agent:
  command: python support_bot.py
  conversation:
    send: "${flowproof.message}\\n"
    until: '^> $'
steps:
  - assert_no_egress
  - user: My order 4711 has not arrived.
  - assert_tool_call: lookup_order where order_id equals 4711
  - assert: reply contains shipped
  - user: Then cancel it, please.
  - assert_tool_call: cancel_order where order_id equals 4711
  - assert_no_tool_call: issue_refund
  - assert: reply contains cancelled
  - user:
      simulate: You are a customer whose order 4711 is late. You want it cancelled.
      until: the agent confirms the cancellation
      max_turns: 3
      sees: reply
"""


def spec_error(tmp_path: Path, text: str) -> SpecError:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    error = info.value
    assert str(error).startswith(f"{path}:{error.line}: ")
    assert "Fix:" in str(error)
    return error


# --- a conversation spec loads, grouped per turn --------------------------------------------


def test_a_conversation_groups_its_steps_per_turn(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SUPPORT_BOT))
    assert spec.is_conversation
    assert spec.task_prompt == ""
    assert spec.agent.conversation == ConversationSpec(
        send="${flowproof.message}\n", until="^> $", wait_first=False
    )
    assert [step.kind for step in spec.conversation_steps] == ["assert_no_egress"]
    turns = spec.conversation
    assert [turn.number for turn in turns] == [1, 2, 3]
    assert [turn.line for turn in turns] == [10, 13, 17]
    assert [turn.message for turn in turns] == [
        "My order 4711 has not arrived.",
        "Then cancel it, please.",
        None,
    ]
    assert [[step.kind for step in turn.steps] for turn in turns] == [
        ["assert_tool_call", "assert"],
        ["assert_tool_call", "assert_no_tool_call", "assert"],
        [],
    ]
    assert isinstance(turns[0].steps[1], ReplyStep) and turns[0].steps[1].line == 12
    assert turns[0].simulated is None and turns[1].simulated is None
    assert turns[2].simulated == SimulatedUser(
        simulate="You are a customer whose order 4711 is late. You want it cancelled.",
        until="the agent confirms the cancellation",
        max_turns=3,
        sees="reply",
    )
    user = spec.steps[1]
    assert isinstance(user, UserStep) and user.message == "My order 4711 has not arrived."
    assert user.text == "My order 4711 has not arrived."
    assert spec.steps[-1].text.startswith("simulated user: You are a customer")


def test_defaults_and_a_one_turn_flow_is_no_conversation(tmp_path: Path) -> None:
    assert ConversationSpec().send == "${flowproof.message}\n"
    assert ConversationSpec().until is None and ConversationSpec().wait_first is False
    assert SimulatedUser(simulate="a", until="b").max_turns == 5
    assert SimulatedUser(simulate="a", until="b").sees == "output"
    spec = load_spec(write(tmp_path, COMMAND + "steps:\n  - prompt: hi\n  - assert: reply is x\n"))
    assert not spec.is_conversation
    assert spec.conversation == () and spec.conversation_steps == ()
    assert spec.task_prompt == "hi"
    assert spec.agent.conversation is None


def test_a_url_conversation_needs_no_conversation_key(tmp_path: Path) -> None:
    text = (
        "name: n\napp: agent\nagent:\n  url: http://127.0.0.1:8000/run\n  proxy_port: 4646\n"
        "steps:\n  - user: hello\n  - user: and again\n  - assert: reply contains x\n"
    )
    spec = load_spec(write(tmp_path, text))
    assert [turn.message for turn in spec.conversation] == ["hello", "and again"]
    assert spec.conversation[1].steps[0].kind == "assert"


def test_the_message_handles_go_in_send(tmp_path: Path) -> None:
    send = '{"type":"user","message":{"role":"user","content":${flowproof.message_json}}}\\n'
    text = COMMAND + f"  conversation:\n    send: '{send}'\n    until: '\"type\":\"result\"'\n"
    spec = load_spec(write(tmp_path, text + "    wait_first: true\nsteps:\n  - user: hi\n"))
    assert spec.agent.conversation is not None
    assert spec.agent.conversation.wait_first is True
    assert (MESSAGE_HANDLE, MESSAGE_JSON_HANDLE) == ("message", "message_json")


def test_the_schema_has_the_conversation_keys() -> None:
    schema = spec_json_schema()
    assert set(schema["$defs"]["ConversationSpec"]["properties"]) == {
        "send",
        "until",
        "wait_first",
    }
    assert set(schema["$defs"]["SimulatedUser"]["properties"]) == {
        "simulate",
        "until",
        "max_turns",
        "sees",
        "model",
    }
    assert schema["$defs"]["SimulatedUser"]["required"] == ["simulate", "until"]
    assert "conversation" in schema["$defs"]["AgentSpec"]["properties"]


# --- red paths: each error at its line, with the fix -----------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "no",
            '`user:` must be text; YAML read `no` as the boolean false. Fix: quote it: user: "no"',
        ),
        ("Yes", 'YAML read `Yes` as the boolean true. Fix: quote it: user: "Yes"'),
        ("3", 'YAML read `3` as a number. Fix: quote it: user: "3"'),
        ("4.5", 'YAML read `4.5` as a number. Fix: quote it: user: "4.5"'),
        ("", "`user:` has no text (YAML read it as null). Fix: write the message"),
        ("~", "`user:` has no text (YAML read `~` as null)"),
        ("''", "`user:` is empty text, and a turn needs a message"),
        (
            "[a, b]",
            "`user:` must be text (the message) or a mapping (a simulated user), got a list",
        ),
    ],
)
def test_a_user_value_that_is_not_text(tmp_path: Path, value: str, message: str) -> None:
    error = spec_error(tmp_path, COMMAND + UNTIL + f"steps:\n  - user: {value}\n")
    assert error.line == 8
    assert message in str(error)


def test_a_non_text_user_value_built_in_python_is_refused_too() -> None:
    data = {"name": "n", "app": "agent", "agent": {"command": "x"}, "steps": [{"user": False}]}
    with pytest.raises(ValueError, match="YAML read `no` as the boolean false"):
        FlowSpec.model_validate(data)


def test_prompt_and_user_in_one_flow(tmp_path: Path) -> None:
    error = spec_error(tmp_path, COMMAND + UNTIL + "steps:\n  - prompt: hi\n  - user: hello\n")
    assert error.line == 9
    assert "`prompt:` and `user:` steps are in one flow" in str(error)
    assert "Fix: write every message as a `- user: ...` step" in str(error)


def test_a_command_conversation_without_until(tmp_path: Path) -> None:
    error = spec_error(tmp_path, COMMAND + "steps:\n  - user: hello\n")
    assert error.line == 3
    assert "needs `agent.conversation.until`" in str(error)
    assert "Fix: add `conversation: {until: '^> $'}` under `agent`" in str(error)
    text = COMMAND + "  conversation:\n    wait_first: true\nsteps:\n  - user: hello\n"
    assert spec_error(tmp_path, text).line == 5


def test_a_conversation_key_under_a_url_agent(tmp_path: Path) -> None:
    text = (
        "name: n\napp: agent\nagent:\n  url: http://127.0.0.1:8000/run\n  proxy_port: 4646\n"
        + UNTIL
        + "steps:\n  - user: hello\n"
    )
    error = spec_error(tmp_path, text)
    assert error.line == 6
    assert "`agent.conversation` only applies to a `command` agent" in str(error)
    assert "Fix: remove `agent.conversation`" in str(error)


def test_a_conversation_key_without_user_steps(tmp_path: Path) -> None:
    error = spec_error(tmp_path, COMMAND + UNTIL + "steps:\n  - prompt: hello\n")
    assert error.line == 5
    assert "`agent.conversation` is set, but no step is a `user:` turn" in str(error)


def test_no_prompt_and_no_user_step(tmp_path: Path) -> None:
    error = spec_error(tmp_path, COMMAND + "steps:\n  - assert: reply contains x\n")
    assert "no `prompt` step" in str(error)
    assert "one `- user: <message>` step per turn" in str(error)


def test_a_bad_until_regex_is_named_at_its_line(tmp_path: Path) -> None:
    text = COMMAND + "  conversation:\n    until: '(['\nsteps:\n  - user: hello\n"
    error = spec_error(tmp_path, text)
    assert error.line == 6
    assert "`agent.conversation.until` is not a valid regular expression" in str(error)


@pytest.mark.parametrize(
    ("send", "message"),
    [
        ("${flowproof.mesage}", "Did you mean `${flowproof.message}`?"),
        ("${flowproof.prompt}", "uses `${flowproof.prompt}`, which is not filled there"),
        ("hello", "does not contain the turn's message"),
    ],
)
def test_send_must_carry_the_message(tmp_path: Path, send: str, message: str) -> None:
    text = COMMAND + f"  conversation:\n    until: x\n    send: '{send}'\nsteps:\n  - user: hi\n"
    error = spec_error(tmp_path, text)
    assert error.line == 7
    assert message in str(error)


@pytest.mark.parametrize(
    ("place", "line", "where"),
    [
        ("  command: python bot.py ${flowproof.message}\n", 4, "agent.command"),
        ("  command: x\n  env: {M: '${flowproof.message_json}'}\n", 5, "agent.env.M"),
    ],
)
def test_message_handles_only_in_send(tmp_path: Path, place: str, line: int, where: str) -> None:
    text = "name: n\napp: agent\nagent:\n" + place + UNTIL + "steps:\n  - user: hi\n"
    error = spec_error(tmp_path, text)
    assert error.line == line
    assert f"`{where}` uses `${{flowproof." in str(error)
    assert "filled only in `agent.conversation.send`" in str(error)


def test_message_handle_in_a_url_agent_header(tmp_path: Path) -> None:
    text = (
        "name: n\napp: agent\nagent:\n  url: http://127.0.0.1:8000/run\n  proxy_port: 4646\n"
        "  headers: {X-M: '${flowproof.message}'}\nsteps:\n  - user: hi\n"
    )
    error = spec_error(tmp_path, text)
    assert error.line == 6
    assert "`agent.headers.X-M` uses `${flowproof.message}`" in str(error)


def test_the_prompt_handle_in_a_conversation(tmp_path: Path) -> None:
    text = COMMAND.replace("bot.py", "bot.py ${flowproof.prompt_file}") + UNTIL
    error = spec_error(tmp_path, text + "steps:\n  - user: hi\n")
    assert error.line == 4
    assert "uses `${flowproof.prompt_file}`, the task given up front" in str(error)


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("      until: done\n", 8, "a simulated `user:` needs `simulate` (the persona and goal)"),
        ("      simulate: a customer\n", 8, "a simulated `user:` needs `until` (when it is done)"),
        (
            "      simulate: a\n      until: b\n      max_turn: 3\n",
            11,
            "unknown key `max_turn` in a simulated `user:`. Did you mean `max_turns`?",
        ),
        (
            "      simulate: a\n      until: b\n      max_turns: 0\n",
            11,
            "`max_turns` of a simulated `user:` must be a whole number of agent turns from 1 to 50",
        ),
        (
            "      simulate: a\n      until: b\n      max_turns: 51\n",
            11,
            "from 1 to 50",
        ),
        (
            "      simulate: a\n      until: b\n      sees: stdout\n",
            11,
            "`sees` of a simulated `user:` is 'stdout'. Fix: write `sees: output`",
        ),
        ("      simulate: ''\n      until: b\n", 9, "`simulate` of a simulated `user:` must be"),
        ("      simulate: a\n      until: no\n", 10, "`until` of a simulated `user:` must be"),
    ],
)
def test_a_simulated_user_written_wrong(tmp_path: Path, body: str, line: int, message: str) -> None:
    error = spec_error(tmp_path, COMMAND + UNTIL + "steps:\n  - user:\n" + body)
    assert error.line == line
    assert message in str(error)


def test_the_cli_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, COMMAND + UNTIL + "steps:\n  - user: no\n")
    result = run_cli("run", path, cwd=tmp_path)
    assert result.code == 2, result.output
    assert f"{path}:8: `user:` must be text" in result.output
    assert 'Fix: quote it: user: "no"' in result.output
