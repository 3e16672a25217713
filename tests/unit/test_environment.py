"""The agent's environment (pointed at the proxy, no real key) and the record upstream."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowproof_cli.cassette import Upstream
from flowproof_cli.cassette.upstream import checked_base_url, upstream_from_environment
from flowproof_cli.dialects.openai_chat import OpenAIChat
from flowproof_cli.errors import ConfigError
from flowproof_cli.process import MAX_ARG_STRLEN, working_directory
from flowproof_cli.runner.environment import (
    PLACEHOLDER_KEY,
    agent_environment,
    prompt_note,
    proxy_handles,
    runtime_handles,
    task_file,
    wiring_hint,
)
from flowproof_cli.spec import parse_spec

PORT = 43210
PROXY_V1 = f"http://127.0.0.1:{PORT}/v1"
PROXY = f"http://127.0.0.1:{PORT}"

INHERITED = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/dev",
    "OPENAI_API_KEY": "sk-real-openai",
    "ANTHROPIC_API_KEY": "sk-ant-real",
    "FLOWPROOF_AGENT_KEY": "sk-flowproof-real",
    "FLOWPROOF_AGENT_UPSTREAM": "https://api.openai.com/v1",
    "OPENAI_BASE_URL": "https://api.openai.com/v1",
    "ANTHROPIC_BASE_URL": "https://api.anthropic.com",
}


def environment(spec_env: dict[str, str] | None = None) -> dict[str, str]:
    return agent_environment(
        INHERITED, port=PORT, prompt="What's the weather?", spec_env=spec_env or {}
    )


def test_injected_variables() -> None:
    env = environment()
    assert env["OPENAI_BASE_URL"] == PROXY_V1
    assert env["OPENAI_API_BASE"] == PROXY_V1
    assert env["OPENAI_BASE"] == PROXY_V1
    assert env["FLOWPROOF_LLM_PROXY"] == PROXY_V1
    assert env["ANTHROPIC_BASE_URL"] == PROXY
    assert env["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    assert env["ANTHROPIC_API_KEY"] == PLACEHOLDER_KEY
    assert PLACEHOLDER_KEY == "flowproof-placeholder-key"
    assert env["FLOWPROOF_PROMPT"] == "What's the weather?"


def test_the_task_is_in_its_file_and_in_flowproof_prompt_while_it_fits() -> None:
    env = agent_environment(
        {**INHERITED, "FLOWPROOF_PROMPT": "outer", "FLOWPROOF_PROMPT_FILE": "/outer"},
        port=PORT,
        prompt="short",
        spec_env={},
        prompt_file="/tmp/task/prompt.txt",
    )
    assert env["FLOWPROOF_PROMPT"] == "short"
    assert env["FLOWPROOF_PROMPT_FILE"] == "/tmp/task/prompt.txt"
    assert prompt_note("short") is None


def test_a_task_no_variable_can_hold_is_left_to_its_file() -> None:
    big = "x" * (MAX_ARG_STRLEN - len("FLOWPROOF_PROMPT="))  # one byte over, with the NUL
    env = agent_environment(
        {**INHERITED, "FLOWPROOF_PROMPT": "outer"}, port=PORT, prompt=big, spec_env={}
    )
    assert "FLOWPROOF_PROMPT" not in env  # neither this task nor an inherited one
    note = prompt_note(big)
    assert note is not None and "FLOWPROOF_PROMPT is not set" in note
    assert "MAX_ARG_STRLEN" in note and "FLOWPROOF_PROMPT_FILE" in note
    fits = big[:-1]
    assert prompt_note(fits) is None
    assert agent_environment(INHERITED, port=PORT, prompt=fits, spec_env={})["FLOWPROOF_PROMPT"]


def test_the_task_file_holds_the_task_and_is_removed_after() -> None:
    task = "a task\nwith ünïcode and\r\nline ends"
    with task_file(task) as path:
        assert Path(path).read_bytes() == task.encode("utf-8")
        assert oct(Path(path).parent.stat().st_mode & 0o777) == "0o700"
    assert not Path(path).parent.exists()


def test_flowproof_record_configuration_is_removed() -> None:
    env = environment()
    assert "FLOWPROOF_AGENT_KEY" not in env
    assert "FLOWPROOF_AGENT_UPSTREAM" not in env


def test_no_real_key_or_upstream_reaches_the_agent() -> None:
    values = set(environment().values())
    for secret in ("sk-real-openai", "sk-ant-real", "sk-flowproof-real"):
        assert secret not in values
    assert "https://api.openai.com/v1" not in values
    assert "https://api.anthropic.com" not in values


#: What a Bedrock client gets (providers/bedrock.py): the endpoint, placeholder
#: credentials, a region (none is inherited here).
BEDROCK_CLIENT_VARIABLES = (
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


def test_other_inherited_variables_are_kept() -> None:
    env = environment()
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["HOME"] == "/home/dev"
    assert set(env) == {
        "PATH",
        "HOME",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "OPENAI_BASE",
        "FLOWPROOF_LLM_PROXY",
        "ANTHROPIC_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "FLOWPROOF_PROMPT",
        # Each provider's own clients (tests/unit/test_provider_upstreams.py).
        "AZURE_OPENAI_ENDPOINT",
        "AZURE_OPENAI_API_KEY",
        "AZURE_API_BASE",
        "AZURE_API_KEY",
        "OPENAI_API_VERSION",
        "OLLAMA_HOST",
        "CO_API_URL",
        "CO_API_KEY",
        "COHERE_API_KEY",
        "GOOGLE_VERTEX_BASE_URL",
        "ANTHROPIC_VERTEX_BASE_URL",
        *BEDROCK_CLIENT_VARIABLES,
    }


def test_spec_env_is_applied_last() -> None:
    env = environment(
        {
            "OPENAI_BASE_URL": "http://127.0.0.1:1/custom",
            "OPENAI_API_KEY": "spec-key",
            "FLOWPROOF_PROMPT": "overridden",
            "PATH": "/opt/bin",
            "EXTRA": "1",
        }
    )
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:1/custom"
    assert env["OPENAI_API_KEY"] == "spec-key"
    assert env["FLOWPROOF_PROMPT"] == "overridden"
    assert env["PATH"] == "/opt/bin"
    assert env["EXTRA"] == "1"
    assert env["OPENAI_API_BASE"] == PROXY_V1  # the rest of the injection stays


def test_pwd_names_the_folder_the_agent_runs_in(tmp_path: Path, monkeypatch) -> None:
    """Inherited, PWD would name the folder flowproof was started from."""
    folder = tmp_path / "specs" / "sub"
    folder.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    inherited = {**INHERITED, "PWD": "/home/dev/app"}
    for cwd in (folder, Path("specs/sub"), "specs/sub/"):
        env = agent_environment(inherited, port=PORT, prompt="p", spec_env={}, cwd=cwd)
        assert env["PWD"] == str(folder.resolve())
    # Without a folder (a caller that starts nothing), the inherited one is left alone.
    assert agent_environment(inherited, port=PORT, prompt="p", spec_env={})["PWD"] == (
        "/home/dev/app"
    )
    # agent.env is applied last, as for every variable.
    env = agent_environment(inherited, port=PORT, prompt="p", spec_env={"PWD": "/x"}, cwd=folder)
    assert env["PWD"] == "/x"


def test_pwd_is_the_physical_folder(tmp_path: Path) -> None:
    """As os.getcwd() reports it in the agent, and as relocation stores `{cwd}`."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert working_directory(link) == {"PWD": str(real.resolve())}
    assert working_directory(link / ".." / "real") == {"PWD": str(real.resolve())}


def test_inherited_mapping_is_not_modified() -> None:
    inherited = dict(INHERITED)
    agent_environment(inherited, port=PORT, prompt="p", spec_env={"X": "1"})
    assert inherited == INHERITED


def test_proxy_handles_and_wiring_hint() -> None:
    assert proxy_handles(PORT) == {"proxy_url": PROXY_V1, "proxy_url_no_v1": PROXY}
    hint = wiring_hint()
    assert hint.startswith(
        "flowproof injected OPENAI_BASE_URL, OPENAI_API_BASE, OPENAI_BASE, "
        "FLOWPROOF_LLM_PROXY, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL; "
    )
    assert '"${flowproof.proxy_url}" (includes /v1)' in hint


def test_runtime_handles_add_the_prompt_and_the_mcp_servers() -> None:
    mcp = {"mcp_url.notes": "http://127.0.0.1:9/mcp"}
    handles = runtime_handles(PORT, "Say hi.\nTwice.", mcp)
    assert handles == {
        "proxy_url": PROXY_V1,
        "proxy_url_no_v1": PROXY,
        "prompt": "Say hi.\nTwice.",
        "mcp_url.notes": "http://127.0.0.1:9/mcp",
    }
    # The prompt is no proxy handle: agent.headers (a url agent's) never gets it.
    assert "prompt" not in proxy_handles(PORT)


def test_the_prompt_handle_in_agent_env_is_the_task() -> None:
    spec = parse_spec(
        "name: n\napp: agent\nagent:\n  command: run\n"
        '  env: {TASK: "${flowproof.prompt}", BAD: "${flowproof.promt}"}\n'
        "steps:\n  - prompt: Say hi.\n  - prompt: Twice.\n",
        "t.flow.yaml",
    )
    spec_env = spec.agent.resolved_env({}, runtime_handles(PORT, spec.task_prompt))
    env = agent_environment(INHERITED, port=PORT, prompt=spec.task_prompt, spec_env=spec_env)
    assert env["TASK"] == env["FLOWPROOF_PROMPT"] == "Say hi.\nTwice."
    assert env["BAD"] == "${flowproof.promt}"  # unknown: passed through as written


def test_headers_of_a_url_agent_take_the_proxy_handles() -> None:
    spec = parse_spec(
        "name: n\napp: agent\nagent:\n  url: http://127.0.0.1:9/run\n  proxy_port: 4646\n"
        '  headers: {X-Base: "${flowproof.proxy_url}", X-Task: "${flowproof.prompt}"}\n'
        "steps:\n  - prompt: go\n",
        "t.flow.yaml",
    )
    headers = spec.agent.resolved_headers({}, proxy_handles(4646))
    assert headers == {"X-Base": "http://127.0.0.1:4646/v1", "X-Task": "${flowproof.prompt}"}


# --- upstream_from_environment ------------------------------------------------------------


def test_flowproof_upstream_wins_over_openai_base_url() -> None:
    upstream = upstream_from_environment(
        {
            "FLOWPROOF_AGENT_UPSTREAM": "https://a.example/v1",
            "OPENAI_BASE_URL": "https://b.example/v1",
        }
    )
    assert upstream.base_url == "https://a.example/v1"
    assert upstream.host == "a.example"


def test_openai_base_url_is_the_fallback_upstream() -> None:
    upstream = upstream_from_environment(
        {"FLOWPROOF_AGENT_UPSTREAM": "", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}
    )
    assert upstream == Upstream("http://127.0.0.1:8000/v1", None)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"FLOWPROOF_AGENT_KEY": "k1", "ANTHROPIC_API_KEY": "k2", "OPENAI_API_KEY": "k3"},
            "k1",
        ),
        ({"ANTHROPIC_API_KEY": "k2", "OPENAI_API_KEY": "k3"}, "k2"),
        ({"OPENAI_API_KEY": "k3"}, "k3"),
        ({"FLOWPROOF_AGENT_KEY": "", "OPENAI_API_KEY": "k3"}, "k3"),
        ({}, None),
    ],
)
def test_key_order(keys: dict[str, str], expected: str | None) -> None:
    upstream = upstream_from_environment(
        {"FLOWPROOF_AGENT_UPSTREAM": "https://u.example/v1", **keys}
    )
    assert upstream.key == expected


@pytest.mark.parametrize("environ", [{}, {"FLOWPROOF_AGENT_UPSTREAM": "", "OPENAI_BASE_URL": ""}])
def test_missing_upstream(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        upstream_from_environment(environ)
    assert str(info.value) == (
        "record needs a real model to forward to: set FLOWPROOF_AGENT_UPSTREAM (or "
        "OPENAI_BASE_URL) to its OpenAI-compatible base URL, e.g. https://api.openai.com/v1 "
        "(or FLOWPROOF_UPSTREAM_<PROVIDER> for each provider the agent calls)"
    )


def test_non_http_upstream() -> None:
    with pytest.raises(ConfigError) as info:
        upstream_from_environment({"FLOWPROOF_AGENT_UPSTREAM": "api.openai.com/v1"})
    assert str(info.value) == (
        "FLOWPROOF_AGENT_UPSTREAM is not an http(s) URL (its value is not shown, in case it "
        "is a key). Fix: set FLOWPROOF_AGENT_UPSTREAM to the model's base URL, e.g. "
        "https://api.openai.com/v1"
    )


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:99999/v1", "http://127.0.0.1:abc/v1", "http://[::1]:-1/v1", "http://h:0/v1"],
)
@pytest.mark.parametrize("variable", ["FLOWPROOF_AGENT_UPSTREAM", "FLOWPROOF_UPSTREAM_ANTHROPIC"])
def test_an_upstream_port_that_is_no_port_is_refused_before_the_agent_starts(
    url: str, variable: str
) -> None:
    """It passed, and every request of the flow was refused with `ValueError: Port out of
    range 0-65535` once the agent ran (exit 1); as `http://[::1` is, it is refused first."""
    environ = {"FLOWPROOF_AGENT_UPSTREAM": "http://127.0.0.1:8000/v1", variable: url}
    with pytest.raises(ConfigError) as info:
        upstream_from_environment(environ)
        checked_base_url(environ, variable)
    assert str(info.value) == (
        f"{variable} is not an http(s) URL (its value is not shown, in case it is a key): "
        f"its port is not a number from 1 to 65535. Fix: set {variable} to the model's base "
        "URL, e.g. https://api.openai.com/v1"
    )


# --- Upstream -----------------------------------------------------------------------------

CHAT = OpenAIChat()


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("sk-bare", {"authorization": "Bearer sk-bare"}),
        ("Bearer x", {"authorization": "Bearer x"}),
        ("bearer y", {"authorization": "bearer y"}),
        (None, {}),
        ("", {}),
    ],
)
def test_auth_headers(key: str | None, expected: dict[str, str]) -> None:
    assert Upstream("https://u.example/v1", key).auth_headers(CHAT) == expected


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("https://u.example/v1", "/v1/chat/completions", "https://u.example/v1/chat/completions"),
        ("https://u.example/v1/", "/chat/completions", "https://u.example/v1/chat/completions"),
        (
            "https://u.example/v1",
            "/v1/chat/completions?api-version=2",
            "https://u.example/v1/chat/completions?api-version=2",
        ),
    ],
)
def test_upstream_url_for(base: str, path: str, url: str) -> None:
    assert Upstream(base).url_for(CHAT, path) == url
