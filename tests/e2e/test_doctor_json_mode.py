"""`flowproof doctor` answers a JSON-mode request with JSON a real client parses.

The agent asks through the real SDKs (Chat `response_format`, Responses `text.format`,
google-genai `response_json_schema`), parses the canned answer and validates it against its
schema; a plain sentence makes it exit 3, which the doctor reports.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_environ, run_cli
from tests.e2e.flows import AGENTS, agent_command
from tests.namespace_run import run_captured

pytestmark = pytest.mark.slow

AGENT = agent_command(AGENTS / "py_json_mode.py")


@pytest.mark.parametrize(
    ("mode", "route"),
    [
        ("chat-object", "POST /v1/chat/completions"),
        ("chat-schema", "POST /v1/chat/completions"),
        ("responses-schema", "POST /v1/responses"),
        ("gemini-schema", "POST /v1/models/gemini-2.5-flash:generateContent"),
    ],
)
def test_a_json_mode_client_gets_json_it_can_parse(mode: str, route: str) -> None:
    result = run_cli("doctor", "--agent", AGENT, env={"JSON_MODE": mode})
    assert result.code == 0, result.output
    assert "the agent exited with code 0" in result.stdout  # it parsed and validated it
    assert f"    {route}: 1 (" in result.stdout
    assert "agent: the" not in result.output


def test_an_answer_that_misses_the_schema_fails_the_agent() -> None:
    # The agent's own check must be able to fail: the instance fills types, not patterns.
    result = run_cli("doctor", "--agent", AGENT, env={"AGENT_PATTERN": "^[0-9]+$"})
    assert result.code == 0, result.output  # the request still arrived: the wiring is fine
    assert "the agent exited with code 3" in result.stdout
    assert "agent: the chat-schema answer" in result.stdout
    assert "does not match '^[0-9]+$'" in result.stdout


GEMINI = REPO / "tests" / "node_modules" / ".bin" / "gemini"


def loopback_only_problem() -> str | None:
    """Why a loopback-only network namespace cannot be made here, if it cannot."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "`unshare` or `ip` is missing (scripts/bootstrap.sh installs them)"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return None if probe.returncode == 0 else "cannot create a network namespace (needs root)"


def test_gemini_cli_router_call_is_answered_once(tmp_path: Path) -> None:
    """Gemini CLI routes each task with a JSON-schema call; a plain answer made it retry that
    call five times with backoff (a doctor run took 104-112 s). Answered with an instance of
    its schema, it makes the call once."""
    problem = loopback_only_problem() or (None if GEMINI.exists() else "npm ci not run in tests/")
    if problem is not None:
        pytest.skip(problem)
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "general": {"disableAutoUpdate": True},
                "privacy": {"usageStatisticsEnabled": False},
            }
        )
    )
    doctor = [
        sys.executable, "-m", "flowproof_cli", "doctor", "--timeout", "100",
        "--agent", f"{shlex.quote(str(GEMINI))} -p ${{flowproof.prompt}}",
    ]  # fmt: skip
    environ = clean_environ(
        {"HOME": str(home), "GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_API_KEY": "unused"}
    )
    completed = run_captured(
        ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *doctor],
        timeout=180,
        env=environ,
        cwd=tmp_path,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert "the agent exited with code 0" in completed.stdout
    pattern = r"^    POST \S+:generateContent: (\d+) \(gemini, provider gemini\)$"
    routed = re.findall(pattern, completed.stdout, re.M)
    assert routed == ["1"], output
