"""The command driver: shell-word splitting, start errors, time bounds, no surviving children."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from flowproof_cli.errors import AgentStartError, ConfigError
from flowproof_cli.process import MAX_ARG_STRLEN, OUTPUT_TAIL, split_command
from flowproof_cli.runner.command import KILL_GRACE_S, AgentOutcome, resolve_argv, run_agent
from tests.e2e.sockets_and_pids import eventually, is_gone

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}


def run(argv: list[str], cwd: Path, timeout_s: float = 30, **env: str) -> AgentOutcome:
    return asyncio.run(run_agent(argv, env={**ENV, **env}, cwd=cwd, timeout_s=timeout_s))


def wait_gone(pid: int, within_s: float = 5.0) -> bool:
    return eventually(lambda: is_gone(pid), within_s)


def read_pid(path: Path) -> int:
    return int(path.read_text().strip())


# --- split_command ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("python agent.py", ["python", "agent.py"]),
        ("  python   agent.py  ", ["python", "agent.py"]),
        ("echo 'a b' \"c d\" e\\ f", ["echo", "a b", "c d", "e f"]),
        ("'a\\b'", ["a\\b"]),  # backslash is literal in single quotes
        ('"a\\"b"', ['a"b']),  # escaped double quote in double quotes
        ('"a\\b"', ["a\\b"]),  # other backslashes stay in double quotes
        ('"\\\\"', ["\\"]),
        ("a\\\\b", ["a\\b"]),
        ("x\"y\"'z'", ["xyz"]),
        ("\"\" '' a", ["", "", "a"]),
        ("'it'\\''s'", ["it's"]),
        (
            "node 'dist/my agent.js' --prompt \"$FLOWPROOF_PROMPT\"",
            ["node", "dist/my agent.js", "--prompt", "$FLOWPROOF_PROMPT"],
        ),
    ],
)
def test_split_command_like_a_posix_shell(command: str, argv: list[str]) -> None:
    assert split_command(command) == argv


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ('echo "price \\$5"', ["echo", "price $5"]),
        ('echo "a\\`b"', ["echo", "a`b"]),
        ("python agent.py \\\n  --verbose", ["python", "agent.py", "--verbose"]),
    ],
)
def test_split_command_posix_escapes_in_double_quotes_and_continuations(
    command: str, argv: list[str]
) -> None:
    assert split_command(command) == argv


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("echo 'unterminated", "cannot parse agent.command \"echo 'unterminated\": unclosed '"),
        ('echo "open', "cannot parse agent.command 'echo \"open': unclosed \""),
        ("echo \\", "cannot parse agent.command 'echo \\\\': trailing backslash"),
    ],
)
def test_unparseable_command(command: str, message: str) -> None:
    with pytest.raises(AgentStartError) as info:
        split_command(command)
    assert str(info.value) == message


@pytest.mark.parametrize("command", ["", "   ", "\n\t"])
def test_empty_command(command: str) -> None:
    with pytest.raises(AgentStartError) as info:
        split_command(command)
    assert str(info.value) == "agent.command is empty"


# --- resolve_argv: handles are one word, never re-split ------------------------------------

TASK = 'Book "the red one" for Ada\'s trip\n  then  confirm'
HANDLES = {"prompt": TASK, "proxy_url": "http://127.0.0.1:4321/v1"}


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("gemini -p ${flowproof.prompt}", ["gemini", "-p", TASK]),
        ('gemini -p "${flowproof.prompt}"', ["gemini", "-p", TASK]),
        ("gemini '${flowproof.prompt}'", ["gemini", TASK]),
        ("agent --task=${flowproof.prompt} x", ["agent", f"--task={TASK}", "x"]),
        ('agent "Task: ${flowproof.prompt}."', ["agent", f"Task: {TASK}."]),
        ("agent ${flowproof.prompt}${flowproof.prompt}", ["agent", TASK + TASK]),
        ("agent --base ${flowproof.proxy_url}", ["agent", "--base", HANDLES["proxy_url"]]),
    ],
)
def test_a_handle_expands_inside_its_word(command: str, argv: list[str]) -> None:
    assert resolve_argv(command, {}, HANDLES) == argv


def test_variables_still_split_before_handles_are_filled() -> None:
    # `${VAR}` keeps its old meaning (substituted, then split); a value that looks like a
    # handle stays as written.
    environ = {"FLAGS": "--a --b", "ODD": "${flowproof.prompt}"}
    argv = resolve_argv("agent ${FLAGS} ${ODD} ${flowproof.prompt}", environ, HANDLES)
    assert argv == ["agent", "--a", "--b", "${flowproof.prompt}", TASK]


def test_an_unknown_handle_is_passed_through_as_one_word() -> None:
    argv = resolve_argv("agent -p ${flowproof.promt} ${flowproof.mcp_url.x}", {}, HANDLES)
    assert argv == ["agent", "-p", "${flowproof.promt}", "${flowproof.mcp_url.x}"]


def test_substituting_before_the_split_would_break_the_task() -> None:
    # What resolve_argv protects against: the task's words split, its quotes parsed.
    assert split_command('gemini -p "Say hi" twice') == ["gemini", "-p", "Say hi", "twice"]
    with pytest.raises(AgentStartError, match="unclosed '"):
        split_command(f"gemini -p {TASK}")


def test_flowproof_prompt_variable_in_a_command_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_argv('agent -p "${FLOWPROOF_PROMPT}"', {"FLOWPROOF_PROMPT": "x"}, HANDLES)
    assert "Fix: write ${flowproof.prompt} instead" in str(info.value)
    assert "(used in agent.command)" in str(info.value)


def test_unset_variable_and_bad_quoting_still_fail() -> None:
    with pytest.raises(ConfigError, match="environment variable CITY is not set"):
        resolve_argv("agent ${CITY} ${flowproof.prompt}", {}, HANDLES)
    with pytest.raises(AgentStartError, match="unclosed"):
        resolve_argv('agent "${flowproof.prompt}', {}, HANDLES)


# --- run_agent: starting ------------------------------------------------------------------


def test_missing_binary_is_named(tmp_path: Path) -> None:
    with pytest.raises(AgentStartError) as info:
        run(["flowproof-no-such-binary-xyz", "--flag"], tmp_path)
    assert str(info.value) == "cannot start the agent: 'flowproof-no-such-binary-xyz' was not found"


def test_non_executable_file_is_named(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    if os.geteuid() == 0 and os.access(script, os.X_OK):
        pytest.skip("root can execute any file here")
    with pytest.raises(AgentStartError) as info:
        run([str(script)], tmp_path)
    assert str(info.value) == f"cannot start the agent: {str(script)!r} is not executable"


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["sh", "a\x00b"], {}, "argument 1 of its command line holds the character U+0000"),
        (["sh"], {"A=B": "x"}, "the environment variable name `A=B` holds `=`"),
        (["sh"], {"": "x"}, "the environment variable name is empty"),
        (["sh"], {"BAD": "a\x00b"}, "the environment variable BAD holds the character U+0000"),
        (["sh"], {"SUR": "\ud800"}, "the environment variable SUR holds U+D800, a lone surrogate"),
        (["sh", "x" * MAX_ARG_STRLEN], {}, "argument 1 of its command line is 131,073 bytes"),
        (["sh"], {"BIG": "x" * MAX_ARG_STRLEN}, "the environment variable BIG is 131,077 bytes"),
    ],
)
def test_what_exec_cannot_carry_is_named_before_the_spawn(
    tmp_path: Path, argv: list[str], env: dict[str, str], named: str
) -> None:
    """A ValueError, UnicodeEncodeError or a bare "Argument list too long" before this."""
    with pytest.raises(AgentStartError) as info:
        asyncio.run(run_agent(argv, env=env, cwd=tmp_path, timeout_s=30))
    assert str(info.value).startswith(f"cannot start the agent: {named}")
    assert "Fix:" in str(info.value)


def test_a_total_over_arg_max_names_the_limit_and_the_largest_variable(tmp_path: Path) -> None:
    limit = os.sysconf("SC_ARG_MAX")
    env = {f"V{n}": "x" * 100_000 for n in range(limit // 100_000 + 2)}
    env["LARGEST"] = "x" * 120_000
    with pytest.raises(AgentStartError) as info:
        run(["sh", "-c", "true"], tmp_path, **env)
    message = str(info.value)
    assert f"over the system's limit ({limit:,} bytes, ARG_MAX)" in message
    assert "the largest variable is LARGEST" in message
    assert "FLOWPROOF_PROMPT_FILE" in message


# --- run_agent: outcome -------------------------------------------------------------------


def test_exit_code_output_env_and_cwd(tmp_path: Path) -> None:
    outcome = run(["sh", "-c", 'echo "out $FOO"; pwd; echo err >&2; exit 3'], tmp_path, FOO="bar")
    assert outcome.exit_code == 3
    assert outcome.timed_out is False
    assert outcome.stdout == f"out bar\n{tmp_path}\n"
    assert outcome.stderr == "err\n"
    assert outcome.duration_s >= 0


def test_output_tails_are_kept(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.stdout.write('x' * 50000 + 'END-OUT\\n')\n"
        "sys.stderr.write(''.join(f'line {i}\\n' for i in range(3000)))\n"
    )
    outcome = run([sys.executable, "-c", code], tmp_path)
    assert outcome.exit_code == 0
    assert len(outcome.stdout) == OUTPUT_TAIL
    assert outcome.stdout.endswith("xxxEND-OUT\n")
    assert len(outcome.stderr) == OUTPUT_TAIL
    assert outcome.stderr.endswith("line 2998\nline 2999\n")
    assert outcome.stderr_tail(2) == "line 2998\nline 2999"


def test_timeout_kills_the_process_and_its_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "pidfile"
    started = time.monotonic()
    outcome = run(
        ["sh", "-c", "sleep 100 & echo $! > pidfile; echo started; wait"], tmp_path, timeout_s=1
    )
    elapsed = time.monotonic() - started
    assert outcome.timed_out is True
    assert outcome.exit_code is None
    assert outcome.stdout == "started\n"
    assert 1 <= outcome.duration_s < 10
    assert elapsed < 10
    grandchild = read_pid(pidfile)
    assert wait_gone(grandchild), f"grandchild {grandchild} survived the timeout"


def test_timeout_kills_a_grandchild_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "pidfile"
    script = "(trap '' TERM; sleep 100; sleep 100) & echo $! > pidfile; wait"
    outcome = run(["sh", "-c", script], tmp_path, timeout_s=1)
    assert outcome.timed_out is True
    assert wait_gone(read_pid(pidfile))


def settled_after(argv: list[str], cwd: Path, *, after_s: float, grace_s: float) -> AgentOutcome:
    """Run the agent; `after_s` into its run the verdict is settled (a divergence)."""

    async def main() -> AgentOutcome:
        settled = asyncio.Event()
        asyncio.get_running_loop().call_later(after_s, settled.set)
        return await run_agent(
            argv, env=ENV, cwd=cwd, timeout_s=60, settled=settled, grace_s=grace_s
        )

    return asyncio.run(main())


def test_settled_the_agent_is_stopped_after_its_grace(tmp_path: Path) -> None:
    """Like a timeout: the whole group goes, the one that ignores SIGTERM too."""
    pidfile = tmp_path / "pidfile"
    script = "(trap '' TERM; sleep 100; sleep 100) & echo $! > pidfile; echo retrying; wait"
    outcome = settled_after(["sh", "-c", script], tmp_path, after_s=0.3, grace_s=0.5)
    assert outcome.stopped is True and outcome.timed_out is False
    assert outcome.exit_code is None
    assert outcome.stdout == "retrying\n"
    assert 0.8 <= outcome.duration_s < 0.8 + KILL_GRACE_S + 2
    assert wait_gone(read_pid(pidfile))


def test_settled_an_agent_that_exits_within_its_grace_keeps_its_exit(tmp_path: Path) -> None:
    outcome = settled_after(["sh", "-c", "sleep 0.5; exit 3"], tmp_path, after_s=0.1, grace_s=5)
    assert outcome.stopped is False and outcome.timed_out is False
    assert outcome.exit_code == 3
    assert outcome.duration_s < 3


def test_the_timeout_still_bounds_a_grace_longer_than_it(tmp_path: Path) -> None:
    async def main() -> AgentOutcome:
        settled = asyncio.Event()
        settled.set()
        return await run_agent(
            ["sleep", "100"], env=ENV, cwd=tmp_path, timeout_s=0.5, settled=settled, grace_s=30
        )

    outcome = asyncio.run(main())
    assert outcome.timed_out is True and outcome.stopped is False
    assert outcome.duration_s < 0.5 + KILL_GRACE_S + 2


def test_grandchild_left_running_after_a_normal_exit_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pidfile"
    outcome = run(
        ["sh", "-c", "sleep 100 >/dev/null 2>&1 & echo $! > pidfile; echo bye; exit 0"],
        tmp_path,
    )
    assert outcome.timed_out is False
    assert outcome.exit_code == 0
    assert outcome.stdout == "bye\n"
    assert outcome.duration_s < 10
    assert wait_gone(read_pid(pidfile))


def test_grandchild_holding_the_pipes_does_not_turn_an_exit_into_a_timeout(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pidfile"
    # The short sleep makes sure the driver is already waiting when the agent exits.
    script = "sleep 100 & echo $! > pidfile; sleep 0.3; echo done"
    try:
        outcome = run(["sh", "-c", script], tmp_path, timeout_s=4)
    finally:
        grandchild = read_pid(pidfile)
    assert wait_gone(grandchild)
    assert outcome.stdout == "done\n"
    assert outcome.timed_out is False
    assert outcome.exit_code == 0
    assert outcome.duration_s < 3


def test_grandchild_holding_the_pipes_is_killed_and_output_collected(tmp_path: Path) -> None:
    pidfile = tmp_path / "pidfile"
    outcome = run(["sh", "-c", "sleep 100 & echo $! > pidfile; echo done"], tmp_path, timeout_s=3)
    assert outcome.stdout == "done\n"
    assert outcome.duration_s < 10
    assert wait_gone(read_pid(pidfile))
