"""Every provider flowproof records, and what the rest of flowproof asks of them all.

A provider is one module here (`base.Provider`) plus its line in `REGISTRY`; its dialects
name it (`Dialect.provider`). The runner, the addons and the session read providers only
through the functions below, so none of them names a provider.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from flowproof_cli.providers.anthropic import ANTHROPIC
from flowproof_cli.providers.azure import AZURE
from flowproof_cli.providers.base import (
    PLACEHOLDER_KEY,
    Provider,
    ProxyAddress,
    UpstreamSigner,
)
from flowproof_cli.providers.bedrock import BEDROCK
from flowproof_cli.providers.cohere import COHERE
from flowproof_cli.providers.gemini import GEMINI
from flowproof_cli.providers.ollama import OLLAMA
from flowproof_cli.providers.openai import OPENAI
from flowproof_cli.providers.vertex import VERTEX

REGISTRY: tuple[Provider, ...] = (OPENAI, ANTHROPIC, GEMINI, AZURE, BEDROCK, VERTEX, OLLAMA, COHERE)
#: Their names, in the registry's order (the order messages list them in).
PROVIDERS: tuple[str, ...] = tuple(provider.name for provider in REGISTRY)
_BY_NAME = {provider.name: provider for provider in REGISTRY}

#: Never inherited by an agent, whichever provider it calls.
WITHHELD_VARIABLES: tuple[str, ...] = tuple(
    dict.fromkeys(name for p in REGISTRY for name in p.withheld_variables)
)
#: Header-name prefixes of the agent's own that never travel upstream.
DROPPED_HEADER_PREFIXES: tuple[str, ...] = tuple(
    dict.fromkeys(prefix for p in REGISTRY for prefix in p.dropped_header_prefixes)
)
#: Providers whose calls record forwards with no key of flowproof's.
KEYLESS_PROVIDERS = frozenset(p.name for p in REGISTRY if p.keyless)


def provider_named(name: str) -> Provider:
    """The registered provider `name` (KeyError for an unknown one: a programming error)."""
    return _BY_NAME[name]


def agent_variables(inherited: Mapping[str, str], proxy: ProxyAddress) -> dict[str, str]:
    """Every provider's variables for the agent (`Provider.agent_variables`)."""
    variables: dict[str, str] = {}
    for provider in REGISTRY:
        variables.update(provider.agent_variables(inherited, proxy))
    return variables


def agent_files(folder: str) -> dict[str, str]:
    """Every provider's private files for the agent, by name in `folder`."""
    files: dict[str, str] = {}
    for provider in REGISTRY:
        files.update(provider.agent_files(folder))
    return files


def write_agent_files(folder: str) -> None:
    """Write `agent_files` into `folder`, each readable by its owner alone."""
    for name, content in agent_files(folder).items():
        descriptor = os.open(
            os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
        )
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(content)


def file_variables(folder: str) -> dict[str, str]:
    """The variables naming the files `write_agent_files` wrote into `folder`."""
    variables: dict[str, str] = {}
    for provider in REGISTRY:
        variables.update(provider.file_variables(folder))
    return variables


def upstream_signers(environ: Mapping[str, str]) -> dict[str, UpstreamSigner]:
    """Record's signer for each provider that signs what it forwards, read once from
    flowproof's own environment. ConfigError (exit 2) for credentials set only in part."""
    signers: dict[str, UpstreamSigner] = {}
    for provider in REGISTRY:
        if (signer := provider.upstream_signer(environ)) is not None:
            signers[provider.name] = signer
    return signers


def secret_values(environ: Mapping[str, str]) -> dict[str, str]:
    """Flowproof's own provider secrets set in `environ`, by variable (scanned for and
    redacted in every flow, like the record keys)."""
    return {
        name: environ[name]
        for provider in REGISTRY
        for name in provider.secret_variables
        if environ.get(name)
    }


def unknown_path_hint(path: str, headers: Mapping[str, str]) -> str:
    """What a provider's client did wrong, for a request no dialect speaks (or empty)."""
    return "".join(provider.unknown_path_hint(path, headers) for provider in REGISTRY)


__all__ = [
    "DROPPED_HEADER_PREFIXES",
    "KEYLESS_PROVIDERS",
    "PLACEHOLDER_KEY",
    "PROVIDERS",
    "REGISTRY",
    "WITHHELD_VARIABLES",
    "Provider",
    "ProxyAddress",
    "UpstreamSigner",
    "agent_files",
    "agent_variables",
    "file_variables",
    "provider_named",
    "secret_values",
    "unknown_path_hint",
    "upstream_signers",
    "write_agent_files",
]
