"""Record's upstream per provider: FLOWPROOF_UPSTREAM_<PROVIDER> / FLOWPROOF_KEY_<PROVIDER>
over the default FLOWPROOF_AGENT_UPSTREAM / FLOWPROOF_AGENT_KEY, each key only in its own
provider's header, and the secret rules for every new variable."""

from __future__ import annotations

import json

import pytest

from flowproof_cli.cassette import CassetteSession, Forward, Upstream
from flowproof_cli.cassette.providers import (
    PROVIDERS,
    key_variable,
    unknown_provider_warnings,
    upstream_variable,
)
from flowproof_cli.cassette.upstream import record_keys
from flowproof_cli.cassette.upstreams import Upstreams, upstreams_from_environment
from flowproof_cli.dialects import DIALECTS, route
from flowproof_cli.errors import ConfigError
from flowproof_cli.mode import Mode
from flowproof_cli.providers.bedrock import PLACEHOLDER_ACCESS_KEY, PLACEHOLDER_SECRET
from flowproof_cli.runner.environment import PLACEHOLDER_KEY, agent_environment, refuse_record_key

DEFAULT = "https://default.example/v1"
ANTHROPIC = "https://anthropic.example"
OPENAI_KEY = "sk-default-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-own-0123456789abcdef"
CHAT = route("/v1/chat/completions")
MESSAGES = route("/v1/messages")
CHAT_BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
MESSAGES_BODY = json.dumps(
    {"model": "c", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
).encode()


def test_every_dialect_names_a_known_provider() -> None:
    for dialect in DIALECTS:
        assert dialect.provider in PROVIDERS, f"{type(dialect).__name__}.provider"


def test_the_variables_are_named_as_documented() -> None:
    assert [upstream_variable(p) for p in PROVIDERS] == [
        "FLOWPROOF_UPSTREAM_OPENAI",
        "FLOWPROOF_UPSTREAM_ANTHROPIC",
        "FLOWPROOF_UPSTREAM_GEMINI",
        "FLOWPROOF_UPSTREAM_AZURE",
        "FLOWPROOF_UPSTREAM_BEDROCK",
        "FLOWPROOF_UPSTREAM_VERTEX",
        "FLOWPROOF_UPSTREAM_OLLAMA",
        "FLOWPROOF_UPSTREAM_COHERE",
    ]
    assert key_variable("azure") == "FLOWPROOF_KEY_AZURE"


def test_the_default_serves_every_provider() -> None:
    upstreams = upstreams_from_environment(
        {"FLOWPROOF_AGENT_UPSTREAM": DEFAULT, "FLOWPROOF_AGENT_KEY": OPENAI_KEY}
    )
    assert upstreams.own == {}
    assert upstreams.notes == ()
    for provider in PROVIDERS:
        assert upstreams.for_provider(provider) == Upstream(DEFAULT, OPENAI_KEY)


def test_a_provider_upstream_and_key_override_the_default_for_that_provider_only() -> None:
    upstreams = upstreams_from_environment(
        {
            "FLOWPROOF_AGENT_UPSTREAM": DEFAULT,
            "FLOWPROOF_AGENT_KEY": OPENAI_KEY,
            "FLOWPROOF_UPSTREAM_ANTHROPIC": ANTHROPIC,
            "FLOWPROOF_KEY_ANTHROPIC": ANTHROPIC_KEY,
        }
    )
    anthropic = upstreams.for_provider("anthropic")
    assert anthropic == Upstream(ANTHROPIC, ANTHROPIC_KEY)
    assert upstreams.for_provider("openai") == Upstream(DEFAULT, OPENAI_KEY)
    assert anthropic is not None and MESSAGES is not None and CHAT is not None
    # Each key in its own provider's header, and nowhere else.
    assert anthropic.auth_headers(MESSAGES) == {"x-api-key": ANTHROPIC_KEY}
    assert upstreams.for_provider("openai").auth_headers(CHAT) == {  # type: ignore[union-attr]
        "authorization": f"Bearer {OPENAI_KEY}"
    }


def test_a_provider_upstream_never_takes_the_default_key() -> None:
    upstreams = upstreams_from_environment(
        {
            "FLOWPROOF_AGENT_UPSTREAM": DEFAULT,
            "FLOWPROOF_AGENT_KEY": OPENAI_KEY,
            "FLOWPROOF_UPSTREAM_ANTHROPIC": ANTHROPIC,
        }
    )
    assert upstreams.for_provider("anthropic") == Upstream(ANTHROPIC, None)
    assert upstreams.notes == (
        "FLOWPROOF_UPSTREAM_ANTHROPIC is set without FLOWPROOF_KEY_ANTHROPIC: anthropic "
        "requests go upstream with no key of flowproof's (the default key goes only to the "
        "default upstream)",
    )


def test_a_keyless_provider_upstream_is_no_note() -> None:
    upstreams = upstreams_from_environment({"FLOWPROOF_UPSTREAM_OLLAMA": "http://127.0.0.1:9"})
    assert upstreams.notes == ()
    assert upstreams.default is None


def test_a_provider_key_alone_goes_to_the_default_upstream() -> None:
    upstreams = upstreams_from_environment(
        {"FLOWPROOF_AGENT_UPSTREAM": DEFAULT, "FLOWPROOF_KEY_ANTHROPIC": ANTHROPIC_KEY}
    )
    assert upstreams.for_provider("anthropic") == Upstream(DEFAULT, ANTHROPIC_KEY)
    assert upstreams.for_provider("openai") == Upstream(DEFAULT, None)


def test_no_default_is_needed_when_each_provider_has_its_own() -> None:
    upstreams = upstreams_from_environment(
        {"FLOWPROOF_UPSTREAM_OPENAI": DEFAULT, "FLOWPROOF_KEY_OPENAI": OPENAI_KEY}
    )
    assert upstreams.default is None
    assert upstreams.for_provider("openai") == Upstream(DEFAULT, OPENAI_KEY)
    assert upstreams.for_provider("anthropic") is None


def test_nothing_to_forward_to_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="FLOWPROOF_UPSTREAM_<PROVIDER> for each provider"):
        upstreams_from_environment({"FLOWPROOF_KEY_OPENAI": OPENAI_KEY})


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_malformed_provider_upstream_is_named_never_shown(provider: str) -> None:
    name = upstream_variable(provider)
    with pytest.raises(ConfigError) as info:
        upstreams_from_environment({name: "sk-pasted-here-0123456789"})
    assert str(info.value).startswith(f"{name} is not an http(s) URL")
    assert "sk-pasted-here" not in str(info.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_provider_key_with_a_newline_is_named_never_shown(provider: str) -> None:
    name = key_variable(provider)
    with pytest.raises(ConfigError) as info:
        upstreams_from_environment({"FLOWPROOF_AGENT_UPSTREAM": DEFAULT, name: "sk-abc-1234567\n"})
    assert str(info.value).startswith(f"{name} holds a space, a line break")
    assert "sk-abc" not in str(info.value)


def test_a_misspelt_provider_is_a_warning_naming_the_nearest() -> None:
    environ = {
        "FLOWPROOF_UPSTREAM_ANTROPIC": ANTHROPIC,
        "FLOWPROOF_KEY_GEMENI": "x",
        "FLOWPROOF_UPSTREAM_TIMEOUT": "5",  # a known variable, not a provider
        "FLOWPROOF_AGENT_UPSTREAM": DEFAULT,
    }
    warnings = unknown_provider_warnings(environ)
    assert warnings == [
        "FLOWPROOF_KEY_GEMENI names no provider flowproof knows, so it is ignored (did you mean "
        "FLOWPROOF_KEY_GEMINI?). Providers: OPENAI, ANTHROPIC, GEMINI, AZURE, BEDROCK, VERTEX, "
        "OLLAMA, COHERE",
        "FLOWPROOF_UPSTREAM_ANTROPIC names no provider flowproof knows, so it is ignored (did "
        "you mean FLOWPROOF_UPSTREAM_ANTHROPIC?). Providers: OPENAI, ANTHROPIC, GEMINI, AZURE, "
        "BEDROCK, VERTEX, OLLAMA, COHERE",
    ]
    assert upstreams_from_environment(environ).notes == tuple(warnings)


# --- the session forwards each request to its provider's upstream ------------------------


def _two_upstreams() -> Upstreams:
    return Upstreams(
        default=None,
        own={
            "openai": Upstream(DEFAULT, OPENAI_KEY),
            "anthropic": Upstream(ANTHROPIC, ANTHROPIC_KEY),
        },
    )


def test_each_request_is_forwarded_to_its_providers_upstream_with_its_key() -> None:
    session = CassetteSession(Mode.RECORD, upstream=_two_upstreams())
    chat = session.on_request("/v1/chat/completions", CHAT_BODY, CHAT)
    messages = session.on_request("/v1/messages", MESSAGES_BODY, MESSAGES)
    assert isinstance(chat, Forward) and isinstance(messages, Forward)
    assert chat.url == f"{DEFAULT}/chat/completions"
    assert chat.headers == {"authorization": f"Bearer {OPENAI_KEY}"}
    assert messages.url == f"{ANTHROPIC}/v1/messages"
    assert messages.headers == {"x-api-key": ANTHROPIC_KEY}
    assert session.errors == []


def test_an_echoed_key_is_redacted_with_the_upstream_that_echoed_it() -> None:
    session = CassetteSession(Mode.RECORD, upstream=_two_upstreams())
    forward = session.on_request("/v1/messages", MESSAGES_BODY, MESSAGES)
    assert isinstance(forward, Forward)
    echo = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": f"your key is {ANTHROPIC_KEY}"}],
        "stop_reason": "end_turn",
    }
    rendered = session.on_upstream_response(forward.pending, 200, json.dumps(echo).encode())
    assert ANTHROPIC_KEY.encode() not in rendered.body
    assert ANTHROPIC_KEY not in json.dumps(session.recorded[0].response)


def test_a_provider_with_no_upstream_fails_the_record_naming_the_variable() -> None:
    session = CassetteSession(
        Mode.RECORD, upstream=Upstreams(None, {"openai": Upstream(DEFAULT, OPENAI_KEY)})
    )
    answer = session.on_request("/v1/messages", MESSAGES_BODY, MESSAGES)
    assert not isinstance(answer, Forward)
    assert answer.status == 502
    reason = (
        "flowproof: record has no upstream for anthropic requests: set "
        "FLOWPROOF_UPSTREAM_ANTHROPIC to the anthropic API's base URL (or "
        "FLOWPROOF_AGENT_UPSTREAM for every provider without its own) and record again"
    )
    assert json.loads(answer.body) == {
        "type": "error",
        "error": {"type": "flowproof_no_upstream", "message": reason},
    }
    assert session.errors == [reason]


# --- the secret rules hold for every new variable --------------------------------------


def _every_provider(value: str) -> dict[str, str]:
    return {key_variable(p): f"{value}-{p}-0123456789" for p in PROVIDERS}


def test_every_provider_key_is_a_record_key() -> None:
    keys = _every_provider("sk-own")
    assert record_keys(keys) == keys


def test_no_provider_key_or_upstream_reaches_the_agent() -> None:
    inherited = {
        "PATH": "/bin",
        **_every_provider("sk-own"),
        **{upstream_variable(p): f"https://{p}.example" for p in PROVIDERS},
        "MY_COPY": "sk-own-cohere-0123456789",  # the same value under another name
    }
    env = agent_environment(inherited, port=1, prompt="p", spec_env={})
    assert not any(name.startswith(("FLOWPROOF_KEY_", "FLOWPROOF_UPSTREAM_")) for name in env)
    assert env["MY_COPY"] == PLACEHOLDER_KEY
    assert not any("sk-own" in value for value in env.values())


def test_a_spec_handing_the_agent_a_provider_key_is_refused() -> None:
    environ = {"FLOWPROOF_KEY_AZURE": "azure-key-0123456789"}
    with pytest.raises(ConfigError) as info:
        refuse_record_key(
            environ, "flow.yaml", env={"AZURE_OPENAI_API_KEY": "azure-key-0123456789"}
        )
    assert "agent.env.AZURE_OPENAI_API_KEY would hand the agent flowproof's record key" in str(
        info.value
    )
    assert "(the value of FLOWPROOF_KEY_AZURE)" in str(info.value)
    assert "azure-key-0123456789" not in str(info.value)


def test_a_logged_upstreams_shows_no_key() -> None:
    assert ANTHROPIC_KEY not in repr(_two_upstreams())


# --- injection: each provider's clients reach the proxy, holding placeholders only -------


def test_each_providers_clients_are_pointed_at_the_proxy_with_placeholders() -> None:
    env = agent_environment({"PATH": "/bin"}, port=4321, prompt="p", spec_env={})
    base = "http://127.0.0.1:4321"
    for name in (
        "AZURE_OPENAI_ENDPOINT",
        "AZURE_API_BASE",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
        "OLLAMA_HOST",
        "CO_API_URL",
        "GOOGLE_VERTEX_BASE_URL",
    ):
        assert env[name] == base, name
    assert env["ANTHROPIC_VERTEX_BASE_URL"] == f"{base}/v1"
    for name in (
        "AZURE_OPENAI_API_KEY",
        "AZURE_API_KEY",
        "CO_API_KEY",
        "COHERE_API_KEY",
    ):
        assert env[name] == PLACEHOLDER_KEY, name
    assert env["AWS_ACCESS_KEY_ID"] == PLACEHOLDER_ACCESS_KEY  # Bedrock's: providers/bedrock.py
    assert env["AWS_SECRET_ACCESS_KEY"] == PLACEHOLDER_SECRET
    assert env["OPENAI_API_VERSION"] == "2024-10-21"


def test_the_users_api_version_is_kept_and_real_cloud_credentials_are_not() -> None:
    inherited = {
        "OPENAI_API_VERSION": "2025-04-01-preview",
        "AWS_ACCESS_KEY_ID": "AKIAREALREALREAL",
        "AWS_SECRET_ACCESS_KEY": "real-secret-0123456789abcdef",
        "AWS_SESSION_TOKEN": "real-session-token-0123456789",
        "AWS_BEARER_TOKEN_BEDROCK": "bedrock-api-key-0123456789",
        "AWS_REGION": "eu-west-1",
    }
    env = agent_environment(inherited, port=1, prompt="p", spec_env={})
    assert env["OPENAI_API_VERSION"] == "2025-04-01-preview"
    assert env["AWS_REGION"] == "eu-west-1"  # the agent's region is flowproof's
    assert env["AWS_ACCESS_KEY_ID"] == PLACEHOLDER_ACCESS_KEY
    assert env["AWS_SECRET_ACCESS_KEY"] == PLACEHOLDER_SECRET
    assert "AWS_SESSION_TOKEN" not in env
    assert "AWS_BEARER_TOKEN_BEDROCK" not in env
    assert "real" not in json.dumps(env)
    # The AWS secret record signs with is a record key: scanned for, redacted everywhere.
    assert set(record_keys(inherited)) == {"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
