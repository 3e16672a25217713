"""The command agent's side of a conversation (runner/conversation.py): each message written
to stdin only after the agent ended the turn before, turns ended by its `until` line (or an
unterminated prompt), and every way it goes wrong named by turn, message and pattern."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.runner.command import run_agent
from flowproof_cli.runner.conversation import (
    Dialogue,
    NextMessage,
    TurnOutcome,
    UserMessage,
    rendered,
    unbuffered,
)

ECHO = """
import sys
print("hello, say something")
while True:
    try:
        line = input("> ")
    except EOFError:
        break
    print(f"you said {line}")
print("bye")
"""


def scripted(messages: list[UserMessage]) -> NextMessage:
    """The written messages, in order (the runner's own walker also plays simulated users)."""

    async def next_message(done: Sequence[TurnOutcome]) -> UserMessage | None:
        return messages[len(done)] if len(done) < len(messages) else None

    return next_message


def _dialogue(messages: list[str], until: str = r"^> $", **kwargs: object) -> Dialogue:
    said = [UserMessage(text, number) for number, text in enumerate(messages, start=1)]
    return Dialogue(
        next_message=scripted(said),
        send="${flowproof.message}\n",
        until=re.compile(until),
        turn=OpenTurn(),
        **kwargs,  # type: ignore[arg-type]
    )


def _run(tmp_path: Path, source: str, dialogue: Dialogue, timeout_s: float = 20.0):  # type: ignore[no-untyped-def]
    script = tmp_path / "agent.py"
    script.write_text(source)
    argv = [sys.executable, str(script)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
    return asyncio.run(
        run_agent(argv, env=env, cwd=tmp_path, timeout_s=timeout_s, dialogue=dialogue)
    )


def test_each_turn_gets_its_message_after_the_prompt_and_the_agent_exits_at_eof(
    tmp_path: Path,
) -> None:
    dialogue = _dialogue(["first", "second"], wait_first=True)
    outcome = _run(tmp_path, ECHO, dialogue)
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.conversation_problem is None
    assert [turn.output for turn in dialogue.turns] == [["you said first"], ["you said second"]]
    assert all(turn.ended for turn in dialogue.turns)
    assert dialogue.turn.number == 2 and dialogue.turn.messages == {1: "first", 2: "second"}
    assert "bye" in outcome.stdout and "you said second" in outcome.stdout


def test_without_wait_first_the_start_up_prompt_is_no_turn_of_its_own(tmp_path: Path) -> None:
    # The agent's first "> " may arrive before or after message 1 was sent: without
    # wait_first it can end turn 1 early; this agent prints it only once asked.
    agent = ECHO.replace('print("hello, say something")', "")
    agent = agent.replace('input("> ")', "input()").replace(
        'print(f"you said {line}")', 'print(f"you said {line}"); print("> ", end="")'
    )
    dialogue = _dialogue(["one"])
    outcome = _run(tmp_path, agent, dialogue)
    assert outcome.conversation_problem is None, outcome.conversation_problem
    assert dialogue.turns[0].output == ["you said one"]


def test_a_turn_that_never_ends_names_the_turn_message_pattern_and_last_lines(
    tmp_path: Path,
) -> None:
    dialogue = _dialogue(["first", "Then cancel it, please."], until=r"^DONE$", wait_first=False)
    agent = ECHO.replace('input("> ")', "input()")
    agent = agent.replace(
        'print(f"you said {line}")',
        'print(f"you said {line}"); print("DONE" if line == "first" else "thinking")',
    )
    outcome = _run(tmp_path, agent, dialogue, timeout_s=3)
    problem = outcome.conversation_problem or ""
    assert outcome.timed_out
    assert 'conversation turn 2 ("Then cancel it, please.") did not end within 3 s' in problem
    assert "until '^DONE$'" in problem
    assert "thinking" in problem


def test_an_agent_that_exits_mid_conversation_is_named_by_the_open_turn(tmp_path: Path) -> None:
    agent = "line = input()\nprint('answer')\nprint('> ')\n"  # one turn, then it leaves
    dialogue = _dialogue(["a", "b", "c"])
    outcome = _run(tmp_path, agent, dialogue)
    problem = outcome.conversation_problem or ""
    assert outcome.exit_code == 0
    assert problem.startswith('the agent exited with code 0 during conversation turn 2 ("b")')


def test_an_agent_that_reads_no_stdin_times_out_on_turn_one(tmp_path: Path) -> None:
    agent = "import time\ntime.sleep(30)\n"
    dialogue = _dialogue(["hello"])
    outcome = _run(tmp_path, agent, dialogue, timeout_s=2)
    problem = outcome.conversation_problem or ""
    assert 'conversation turn 1 ("hello") did not end within 2 s' in problem
    assert "(the agent never read its message: 6 byte(s) of it wait unread on its stdin)" in problem
    assert problem.endswith("; it printed nothing")


def test_an_agent_that_does_not_exit_at_eof_is_told_apart_from_a_stuck_turn(
    tmp_path: Path,
) -> None:
    agent = "import time\ninput()\nprint('> ')\ntime.sleep(30)\n"
    dialogue = _dialogue(["only"])
    outcome = _run(tmp_path, agent, dialogue, timeout_s=3)
    problem = outcome.conversation_problem or ""
    assert "did not exit within 3 s after the conversation's last turn" in problem


def test_send_renders_the_message_and_its_json_form() -> None:
    template = '{"content":${flowproof.message_json}}|${flowproof.message}\n'
    assert rendered(template, 'say "hi"') == b'{"content":"say \\"hi\\""}|say "hi"\n'


def test_an_until_pattern_past_its_budget_stops_the_conversation_naming_it(
    tmp_path: Path,
) -> None:
    agent = "import sys\nfor line in sys.stdin:\n    print('x' * 40, flush=True)\n"
    dialogue = _dialogue(["one", "two"], until="(.|.)*!")
    outcome = _run(tmp_path, agent, dialogue, timeout_s=20)
    problem = outcome.conversation_problem or ""
    assert problem.startswith('conversation turn 1 ("one"): the `until` pattern `(.|.)*!`')
    assert "ran past its budget" in problem
    assert outcome.exit_code == 0  # stdin closed: the agent ended at end of input


def test_without_wait_first_turn_one_is_open_before_the_agent_can_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call the agent makes while it starts belongs to turn 1 however late the event loop
    writes the message (a clean-clone run failed: an MCP call made at start was turn 0 at
    record, the loop busy loading the proxy, and turn 1 at replay)."""
    stamp = tmp_path / "stamp"
    agent = (
        "import time, sys\n"
        f"open({str(stamp)!r}, 'w').write(repr(time.monotonic()))\n"
        "for line in sys.stdin:\n    print('> ', flush=True)\n"
    )
    start = Dialogue.start

    async def late_start(self: Dialogue, capture: Any) -> None:
        time.sleep(1.0)  # the loop busy elsewhere: the agent is up and calling meanwhile
        await start(self, capture)

    monkeypatch.setattr(Dialogue, "start", late_start)
    dialogue = _dialogue(["hi"])
    outcome = _run(tmp_path, agent, dialogue)
    assert outcome.conversation_problem is None, outcome.conversation_problem
    assert dialogue.turn.opened_at[1] < float(stamp.read_text())


def test_with_wait_first_the_agents_start_is_before_the_first_turn() -> None:
    dialogue = _dialogue(["hi"], wait_first=True)
    dialogue.begin()
    assert dialogue.turn.number == 0 and 1 not in dialogue.turn.opened_at
    dialogue.close()


def test_a_prompt_and_its_newline_written_apart_end_one_turn_and_add_no_empty_line() -> None:
    """An unbuffered `print("> ")` may reach flowproof as `> ` then `\\n`: the turn ends at
    `> ` as it stands, and the newline is not an empty first line of the next turn."""

    async def scenario() -> list[list[str]]:
        dialogue = _dialogue(["a", "b"])
        dialogue._ended = asyncio.Event()  # turn 1 open, as `_converse` leaves it
        first = TurnOutcome(1, "a", 1)
        dialogue.turns.append(first)
        dialogue._active = first
        dialogue.feed(b"answer a\n> ")
        assert dialogue._ended.is_set() and first.ended
        second = TurnOutcome(2, "b", 2)
        dialogue.turns.append(second)
        dialogue._active, dialogue._ended = second, asyncio.Event()
        dialogue.feed(b"\n")
        dialogue.feed(b"answer b\n")
        dialogue.close()
        return [turn.output for turn in dialogue.turns]

    assert asyncio.run(scenario()) == [["answer a"], ["answer b"]]


def test_a_python_agent_that_never_flushes_still_ends_its_turns(tmp_path: Path) -> None:
    """`unbuffered` is what makes a plain `print("> ")` reach flowproof while the agent
    waits: without it the prompt sits in the agent's pipe buffer and the turn never ends."""
    agent = (
        "import sys\nfor line in sys.stdin:\n    print('got ' + line.strip())\n    print('> ')\n"
    )
    script = tmp_path / "agent.py"
    script.write_text(agent)

    def run(env: dict[str, str]) -> Any:
        dialogue = _dialogue(["one"])
        argv = [sys.executable, str(script)]
        return asyncio.run(run_agent(argv, env=env, cwd=tmp_path, timeout_s=4, dialogue=dialogue))

    plain = {"PATH": "/usr/bin:/bin"}
    assert run(unbuffered(plain)).conversation_problem is None
    assert "did not end within 4 s" in (run(plain).conversation_problem or "")
    assert unbuffered({"PYTHONUNBUFFERED": "0"})["PYTHONUNBUFFERED"] == "0"  # the spec's wins
