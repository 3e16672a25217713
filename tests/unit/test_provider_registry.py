"""Every registered provider has every part of its contract (docs/architecture.md, "The
provider contract"), and the rest of flowproof knows providers only through the registry.

The last test adds a provider that exists nowhere else, by its registration alone, and
finds it in the agent's environment, its private files, the dropped headers and the
unknown-path hint: what "adding a provider touches one module" means.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from flowproof_addons.credentials import DROPPED_HEADERS, drop_agent_credentials
from flowproof_cli import providers
from flowproof_cli.dialects import AUTH_HEADERS, DIALECTS
from flowproof_cli.providers import (
    PLACEHOLDER_KEY,
    PROVIDERS,
    REGISTRY,
    Provider,
    ProxyAddress,
    provider_named,
)
from flowproof_cli.runner.environment import agent_environment, injected_variables, task_file
from tests.conftest import REPO

PROXY_PORT = 4321
PROXY = ProxyAddress.on_port(PROXY_PORT)
IDS = [provider.name for provider in REGISTRY]


def test_names_are_unique_lower_case_and_every_dialect_names_one() -> None:
    assert len(set(PROVIDERS)) == len(PROVIDERS)
    assert all(name == name.lower() and name.isidentifier() for name in PROVIDERS)
    spoken = {dialect.provider for dialect in DIALECTS}
    assert spoken <= set(PROVIDERS), (
        f"dialects name unregistered providers: {spoken - set(PROVIDERS)}"
    )
    assert set(PROVIDERS) <= spoken, f"providers no dialect speaks: {set(PROVIDERS) - spoken}"


@pytest.mark.parametrize("provider", REGISTRY, ids=IDS)
def test_its_clients_are_pointed_at_the_proxy(provider: Provider) -> None:
    assert provider.root_url_variables or provider.v1_url_variables, (
        f"{provider.name}: no base-URL variable its clients read"
    )
    variables = provider.agent_variables({}, PROXY)
    for name in provider.root_url_variables:
        assert variables[name] == PROXY.root, f"{provider.name}: {name}"
    for name in provider.v1_url_variables:
        assert variables[name] == PROXY.v1, f"{provider.name}: {name}"


@pytest.mark.parametrize("provider", REGISTRY, ids=IDS)
def test_its_placeholders_are_placeholders(provider: Provider) -> None:
    for name, value in provider.placeholders.items():
        assert "placeholder" in value.lower(), f"{provider.name}: {name} holds {value!r}"


@pytest.mark.parametrize("provider", REGISTRY, ids=IDS)
def test_its_secrets_are_withheld_and_never_reach_the_agent(provider: Provider) -> None:
    assert set(provider.secret_variables) <= set(provider.withheld_variables)
    inherited = {name: f"real-{name.lower()}-0123456789" for name in provider.withheld_variables}
    env = agent_environment(inherited, port=PROXY_PORT, prompt="p", spec_env={})
    for name, value in inherited.items():
        assert value not in env.values(), f"{provider.name}: {name} reached the agent"
    assert providers.secret_values(inherited).keys() >= set(provider.secret_variables)


@pytest.mark.parametrize("provider", REGISTRY, ids=IDS)
def test_a_default_gives_way_to_the_agents_own(provider: Provider) -> None:
    for name in provider.defaults:
        own = provider.agent_variables({name: "the-users-own"}, PROXY)
        assert name not in own, f"{provider.name}: overrides the agent's {name}"


def test_no_two_providers_set_one_variable_to_different_values() -> None:
    seen: dict[str, tuple[str, str]] = {}
    for provider in REGISTRY:
        for name, value in provider.agent_variables({}, PROXY).items():
            if name in seen:
                assert seen[name][1] == value, f"{name}: {seen[name][0]} and {provider.name}"
            seen[name] = (provider.name, value)


def test_injected_variables_name_everything_flowproof_changes() -> None:
    """What `agent_environment` adds or changes is exactly what `injected_variables` lists
    (a CI run found Bedrock's variables missing from the list)."""
    with task_file("p") as prompt_file:
        env = agent_environment(
            {}, port=PROXY_PORT, prompt="p", spec_env={}, prompt_file=prompt_file
        )
        assert set(env) == set(injected_variables(PROXY_PORT, "p", prompt_file))


def test_the_private_files_are_written_for_the_agent_alone() -> None:
    with task_file("p") as prompt_file:
        folder = os.path.dirname(prompt_file)
        for name, path in providers.file_variables(folder).items():
            mode = stat.S_IMODE(Path(path).stat().st_mode)
            assert mode == 0o600, f"{name}: {oct(mode)}"
    assert not Path(folder).exists()


def test_every_credential_header_and_prefix_is_dropped_before_forwarding() -> None:
    assert set(AUTH_HEADERS) <= set(DROPPED_HEADERS)
    headers = {name: "placeholder" for name in AUTH_HEADERS}
    headers.update({f"{prefix}date": "x" for prefix in providers.DROPPED_HEADER_PREFIXES})
    headers.update({"host": "127.0.0.1:1", "accept-encoding": "gzip", "user-agent": "kept"})
    drop_agent_credentials(headers)
    assert headers == {"user-agent": "kept"}


def test_only_signing_providers_have_a_signer_and_keyless_ones_are_marked() -> None:
    signers = providers.upstream_signers({})
    assert set(signers) == {"bedrock"}
    assert {"bedrock", "ollama"} == providers.KEYLESS_PROVIDERS
    assert provider_named("bedrock").dropped_header_prefixes == ("x-amz-",)


@dataclass(frozen=True)
class _Acme(Provider):
    def agent_files(self, folder: str) -> dict[str, str]:
        return {"acme.json": "{}"}

    def file_variables(self, folder: str) -> dict[str, str]:
        return {"ACME_CONFIG": os.path.join(folder, "acme.json")}

    def unknown_path_hint(self, path: str, headers: Mapping[str, str]) -> str:
        return ". acme-sdk needs a path" if headers.get("user-agent") == "acme" else ""


def test_a_new_provider_is_its_registration_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    acme = _Acme(
        "acme",
        root_url_variables=("ACME_BASE_URL",),
        placeholders={"ACME_KEY": PLACEHOLDER_KEY},
    )
    monkeypatch.setattr(providers, "REGISTRY", (*REGISTRY, acme))
    with task_file("p") as prompt_file:
        env = agent_environment(
            {}, port=PROXY_PORT, prompt="p", spec_env={}, prompt_file=prompt_file
        )
        assert env["ACME_BASE_URL"] == PROXY.root and env["ACME_KEY"] == PLACEHOLDER_KEY
        assert Path(env["ACME_CONFIG"]).read_text() == "{}"
    assert providers.unknown_path_hint("/", {"user-agent": "acme"}) == ". acme-sdk needs a path"
    assert providers.unknown_path_hint("/", {}) == ""


#: The provider table's row for each registered provider (docs/agents.md, "Providers").
_ROWS = {
    "openai": "| OpenAI |",
    "anthropic": "| Anthropic |",
    "gemini": "| Gemini |",
    "azure": "| Azure OpenAI |",
    "bedrock": "| Amazon Bedrock ",
    "vertex": "| Vertex AI ",
    "ollama": "| Ollama ",
    "cohere": "| Cohere ",
}


@pytest.mark.parametrize("provider", REGISTRY, ids=IDS)
def test_the_provider_table_names_every_variable_it_injects(provider: Provider) -> None:
    """docs/agents.md's "Variables injected" column is the registry's, variable by variable."""
    table = (REPO / "docs" / "agents.md").read_text(encoding="utf-8")
    row = next((line for line in table.splitlines() if line.startswith(_ROWS[provider.name])), None)
    assert row is not None, f"docs/agents.md has no provider row for {provider.name}"
    injected = row.split(" | ")[2]
    names = {**provider.agent_variables({}, PROXY), **provider.file_variables("/private")}
    missing = [name for name in names if f"`{name}`" not in injected]
    assert not missing, f"docs/agents.md's {provider.name} row does not name {missing}"
