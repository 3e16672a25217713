"""`flowproof doctor --agent CMD`: real commands, all three exit codes, every dialect.

The canned replies must be valid to each real SDK, streamed or not: an agent that parses
them finishes its loop and exits 0.
"""

from __future__ import annotations

import shlex
import sys

import pytest

from flowproof_cli.dialects import dialect_named
from flowproof_cli.providers import PROVIDERS
from tests.conftest import run_cli
from tests.e2e.flows import AGENTS

pytestmark = pytest.mark.slow

PY = shlex.quote(sys.executable)


def agent(script: str) -> str:
    return f"{PY} {shlex.quote(str(AGENTS / script))}"


@pytest.mark.parametrize(
    ("script", "route", "dialect"),
    [
        ("py_openai_chat.py", "POST /v1/chat/completions", "openai-chat"),
        ("py_openai_chat_stream.py", "POST /v1/chat/completions", "openai-chat"),
        ("py_openai_responses_stream.py", "POST /v1/responses", "openai-responses"),
        ("py_anthropic.py", "POST /v1/messages", "anthropic"),
        ("py_anthropic_stream.py", "POST /v1/messages", "anthropic"),
        (
            "py_google_genai_stream.py",
            "POST /v1/models/gemini-2.5-flash:streamGenerateContent",
            "gemini",
        ),
    ],
)
def test_requests_arrive(script: str, route: str, dialect: str) -> None:
    result = run_cli("doctor", "--agent", agent(script), "--timeout", "60")
    assert result.code == 0, result.output
    assert "the agent exited with code 0" in result.stdout  # it parsed the canned reply
    assert "model requests: 1\n" in result.stdout
    provider = dialect_named(dialect).provider  # doctor names the provider the request spoke
    assert f"    {route}: 1 ({dialect}, provider {provider})\n" in result.stdout
    assert result.stdout.rstrip().endswith("OK: the agent's model client reaches flowproof's proxy")


def test_prompt_is_given_and_key_is_not_needed() -> None:
    script = (
        "import os, sys; from openai import OpenAI; "
        "assert os.environ['FLOWPROOF_PROMPT'] == 'Count to three.'; "
        "assert open(os.environ['FLOWPROOF_PROMPT_FILE']).read() == 'Count to three.'; "
        "assert open(sys.argv[1]).read() == 'Count to three.'; "
        "assert 'FLOWPROOF_AGENT_KEY' not in os.environ; "
        "r = OpenAI(max_retries=0).chat.completions.create(model='m', messages=[]); "
        "print(r.choices[0].message.content)"
    )
    result = run_cli(
        "doctor",
        "--agent",
        f"{PY} -c {shlex.quote(script)} ${{flowproof.prompt_file}}",
        "--prompt",
        "Count to three.",
        env={"FLOWPROOF_AGENT_KEY": "sk-real"},
    )
    assert result.code == 0, result.output
    assert "    POST /v1/chat/completions: 1 (openai-chat, provider openai)" in result.stdout


def test_no_request_names_the_variables_and_the_handles() -> None:
    result = run_cli("doctor", "--agent", f"{PY} -c 'print(1)'")
    assert result.code == 1, result.output
    assert "model requests: 0\n" in result.stdout
    assert "FAIL: no model request reached flowproof's proxy" in result.stdout
    assert "    FLOWPROOF_LLM_PROXY = http://127.0.0.1:" in result.stdout
    assert "    openai: OPENAI_BASE_URL, OPENAI_API_BASE, OPENAI_BASE = http://127.0.0.1:" in (
        result.stdout
    )
    assert "    anthropic: ANTHROPIC_BASE_URL = http://127.0.0.1:" in result.stdout
    assert "    bedrock: AWS_ENDPOINT_URL_BEDROCK_RUNTIME = http://127.0.0.1:" in result.stdout
    assert "GOOGLE_APPLICATION_CREDENTIALS = <the flow's private folder>/" in result.stdout
    for name in PROVIDERS:  # every registered provider's line
        assert f"\n    {name}: " in result.stdout
    assert '"${flowproof.proxy_url}"' in result.stdout
    assert '"${flowproof.proxy_url_no_v1}"' in result.stdout


def test_refused_routes_are_listed_and_stderr_shown() -> None:
    script = (
        "import os, sys, urllib.request as u\n"
        "try: u.urlopen(os.environ['OPENAI_BASE_URL'] + '/audio/voices')\n"
        "except Exception as e: print('probe failed:', e, file=sys.stderr)\n"
        "sys.exit(3)"
    )
    result = run_cli("doctor", "--agent", f"{PY} -c {shlex.quote(script)}")
    assert result.code == 1, result.output
    assert "the agent exited with code 3" in result.stdout
    assert "other requests (not model routes, answered 404):\n    GET /v1/audio/voices: 1" in (
        result.stdout
    )
    assert "probe failed: HTTP Error 404" in result.stdout


def test_hanging_agent_is_killed_after_the_timeout() -> None:
    result = run_cli(
        "doctor", "--agent", f"{PY} -c 'import time; time.sleep(60)'", "--timeout", "1"
    )
    assert result.code == 1, result.output
    assert "was killed after 1." in result.stdout


def test_missing_binary_is_exit_2() -> None:
    result = run_cli("doctor", "--agent", "flowproof-no-such-agent-xyz --flag")
    assert result.code == 2
    assert "cannot start the agent: 'flowproof-no-such-agent-xyz' was not found" in result.stderr


def test_agent_is_required() -> None:
    result = run_cli("doctor")
    assert result.code == 2
    assert "--agent" in result.stderr
