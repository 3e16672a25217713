"""flowproof's own AWS credentials sign what record forwards to Bedrock and go nowhere else:
never into the agent's environment (it gets placeholders), never unscanned in what a flow
leaves behind (they are scanned for and redacted like the record keys)."""

from __future__ import annotations

from flowproof_cli.evidence.secrets import record_key_secrets
from flowproof_cli.runner.environment import agent_environment

OWN = {
    "AWS_ACCESS_KEY_ID": "AKIAOWNACCESSKEY0001",
    "AWS_SECRET_ACCESS_KEY": "own/secret+access/key0123456789",
    "AWS_SESSION_TOKEN": "own-session-token-0123456789",
    "AWS_SECURITY_TOKEN": "own-security-token-0123456789",
    "AWS_BEARER_TOKEN_BEDROCK": "own-bedrock-api-key-0123456789",
    "AWS_PROFILE": "own-profile",
}


def test_the_agent_gets_placeholders_never_flowprofs_aws_credentials() -> None:
    env = agent_environment({**OWN, "PATH": "/bin"}, port=4321, prompt="p", spec_env={})
    for name, value in OWN.items():
        assert value not in env.values(), name
    assert "AWS_SESSION_TOKEN" not in env and "AWS_PROFILE" not in env
    assert "AWS_BEARER_TOKEN_BEDROCK" not in env
    assert env["AWS_ACCESS_KEY_ID"] == "FLOWPROOFPLACEHOLDER"
    assert env["AWS_SECRET_ACCESS_KEY"] == "flowproof-placeholder-key"
    assert env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] == "http://127.0.0.1:4321"
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"


def test_an_inherited_region_is_kept() -> None:
    env = agent_environment({"AWS_REGION": "eu-west-3"}, port=1, prompt="p", spec_env={})
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "eu-west-3"


def test_the_aws_secrets_are_scanned_for_like_the_record_keys() -> None:
    scanned = {secret.name for secret in record_key_secrets(OWN)}
    assert {"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"} <= scanned
    # Falsifiable: a value too short to tell from ordinary text is not scanned for
    assert not record_key_secrets({"AWS_SECRET_ACCESS_KEY": "abc"})


def test_a_record_key_in_an_inherited_region_is_not_copied_to_the_other_name() -> None:
    """The region is copied from the environment as the agent gets it (keys replaced)."""
    key = "sk-record-key-0123456789"
    inherited = {"FLOWPROOF_AGENT_KEY": key, "AWS_REGION": f"eu-{key}"}
    env = agent_environment(inherited, port=1, prompt="p", spec_env={})
    assert not any(key in value for value in env.values())
    assert env["AWS_DEFAULT_REGION"] == env["AWS_REGION"]
