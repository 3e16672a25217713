"""`${flowproof.*}` handles: an agent that reads its own variable records and replays.

The agent ignores every injected variable; the spec maps the proxy into the variable it
reads (or its command line), and OPENAI_BASE_URL points nowhere to prove the handle did it.
`${flowproof.prompt}` hands the task to an agent that takes it as its one argument.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CliResult, run_cli
from tests.e2e.flows import AGENTS, agent_command, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

AGENT = AGENTS / "py_custom_base_var.py"
DECOY = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
PASSED_THROUGH = {
    "UNKNOWN_HANDLE": "${flowproof.no_such_handle}",
    "MCP_HANDLE": "${flowproof.mcp_url.notes}",
}


def record_then_replay(spec: Path) -> None:
    with FakeUpstream() as fake:
        recorded = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
        assert recorded.code == 0, recorded.output
        assert len(fake.model_requests()) == 2
    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output
    assert replayed.stdout.startswith("PASS: weather flow")


def test_custom_variable_mapped_with_a_handle(tmp_path: Path) -> None:
    env = {"MY_LLM_BASE": "${flowproof.proxy_url}", **DECOY, **PASSED_THROUGH}
    record_then_replay(write_flow(tmp_path, command=agent_command(AGENT), env=env))


def test_handle_in_the_command_line(tmp_path: Path) -> None:
    command = f"{agent_command(AGENT)} --base ${{flowproof.proxy_url}}"
    record_then_replay(write_flow(tmp_path, command=command, env=dict(DECOY)))


def test_handle_without_v1(tmp_path: Path) -> None:
    command = f"{agent_command(AGENT)} --base ${{flowproof.proxy_url_no_v1}}/v1"
    record_then_replay(write_flow(tmp_path, command=command, env=dict(DECOY)))


def record_fails(folder: Path, env: dict[str, str], *said: str) -> None:
    """The agent with `env` fails its record against the fake, saying each of `said`."""
    spec = write_flow(folder, command=agent_command(AGENT), env=env)
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 1, result.output
    for fragment in said:
        assert fragment in result.stdout, result.output


def test_without_the_mapping_nothing_reaches_the_proxy(tmp_path: Path) -> None:
    env = {"MY_LLM_BASE": "http://127.0.0.1:9/v1", **PASSED_THROUGH}
    record_fails(
        tmp_path,
        env,
        "the agent exited with code 1 before making any model call",
        "APIConnectionError",
    )


def test_a_changed_pass_through_handle_is_noticed_by_the_agent(tmp_path: Path) -> None:
    # The agent's own check is what the tests above rely on: it must be able to fail.
    env = {"MY_LLM_BASE": "${flowproof.proxy_url}", "UNKNOWN_HANDLE": "${flowproof.proxy_url}"}
    record_fails(
        tmp_path, env, "the agent exited with code 4", "UNKNOWN_HANDLE is 'http://127.0.0.1:"
    )


# --- `${flowproof.prompt}`: the task as one argument ----------------------------------------

ARGV_AGENT = AGENTS / "py_prompt_argv.py"
# Two prompt steps (joined with a newline), spaces, both quote kinds and a backslash.
FIRST = 'Book "the red one" for Ada\'s  trip, path C:\\tmp'
SECOND = "then say 'done'"
TASK_STEPS = [
    {"prompt": FIRST},
    {"prompt": SECOND},
    {"assert": f"reply contains You said: {FIRST}\n{SECOND}"},
]


def record(spec: Path) -> CliResult:
    with FakeUpstream() as fake:
        return run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})


def test_the_prompt_handle_arrives_as_one_argument(tmp_path: Path) -> None:
    command = f"{agent_command(ARGV_AGENT)} ${{flowproof.prompt}}"
    spec = write_flow(tmp_path, command=command, tools=[], steps=TASK_STEPS)
    recorded = record(spec)
    assert recorded.code == 0, recorded.output
    assert "warning" not in recorded.output
    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output


def test_the_prompt_handle_as_an_agent_env_value(tmp_path: Path) -> None:
    env = {"TASK_VARIABLE": "MY_TASK", "MY_TASK": "${flowproof.prompt}"}
    spec = write_flow(
        tmp_path, command=agent_command(ARGV_AGENT), env=env, tools=[], steps=TASK_STEPS
    )
    recorded = record(spec)
    assert recorded.code == 0, recorded.output


def test_the_task_written_into_the_command_is_split(tmp_path: Path) -> None:
    # The red path the handle exists for: text after the command becomes several arguments.
    command = f"{agent_command(ARGV_AGENT)} Book the red one"
    spec = write_flow(tmp_path, command=command, tools=[], steps=TASK_STEPS)
    result = record(spec)
    assert result.code == 1
    assert "the agent exited with code 5 before making any model call" in result.stdout
    assert "expected 1 argument(s), got ['Book', 'the', 'red', 'one']" in result.stdout


def test_a_misspelt_prompt_handle_is_warned_about(tmp_path: Path) -> None:
    command = f"{agent_command(ARGV_AGENT)} ${{flowproof.promt}}"
    spec = write_flow(tmp_path, command=command, tools=[], steps=TASK_STEPS)
    result = record(spec)
    assert result.code == 1  # the agent got the literal text, so the reply check fails
    assert 'the reply was: "Hello! You said: ${flowproof.promt}"' in result.stdout
    assert (
        "    warning: agent.command uses `${flowproof.promt}`, which flowproof does not "
        "provide; did you mean `${flowproof.prompt}`? It is passed on as written\n"
    ) in result.stdout


def test_a_misspelt_proxy_handle_is_warned_about(tmp_path: Path) -> None:
    env = {"MY_LLM_BASE": "${flowproof.proxy_ur}"}
    spec = write_flow(tmp_path, command=agent_command(AGENT), env=env)
    result = record(spec)
    assert result.code == 1
    assert "did you mean `${flowproof.proxy_url}`?" in result.stdout


@pytest.mark.parametrize(
    ("command", "env", "where"),
    [
        (f'{agent_command(ARGV_AGENT)} "${{FLOWPROOF_PROMPT}}"', {}, "agent.command"),
        (agent_command(ARGV_AGENT), {"MY_TASK": "${FLOWPROOF_PROMPT}"}, "agent.env.MY_TASK"),
    ],
)
def test_the_flowproof_prompt_variable_points_at_the_handle(
    tmp_path: Path, command: str, env: dict[str, str], where: str
) -> None:
    spec = write_flow(tmp_path, command=command, env=env, tools=[], steps=TASK_STEPS)
    result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": "http://127.0.0.1:9/v1"})
    assert result.code == 2, result.output
    assert result.stderr.strip() == (
        f"error: ${{FLOWPROOF_PROMPT}} (used in {where}) is the variable flowproof sets for the "
        "agent, not one a spec can read. Fix: write ${flowproof.prompt} instead: the task, as "
        "one argument in agent.command or as a value in agent.env"
    )
    assert "export" not in result.output


def test_doctor_fills_the_prompt_handle(tmp_path: Path) -> None:
    command = f"{agent_command(ARGV_AGENT)} ${{flowproof.prompt}}"
    result = run_cli("doctor", "--agent", command, "--prompt", FIRST, cwd=tmp_path)
    assert result.code == 0, result.output
    assert "the agent exited with code 0" in result.stdout
    red = run_cli("doctor", "--agent", f"{agent_command(ARGV_AGENT)} {FIRST}", cwd=tmp_path)
    assert red.code == 2  # the unbalanced quote in the task cannot even be parsed
    assert "cannot parse agent.command" in red.stderr
