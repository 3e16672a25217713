"""Record's upstream for each provider, read from flowproof's own environment.

FLOWPROOF_AGENT_UPSTREAM / FLOWPROOF_AGENT_KEY are the default for every provider;
FLOWPROOF_UPSTREAM_<PROVIDER> / FLOWPROOF_KEY_<PROVIDER> override them for one. So an agent
that plans with one provider and writes with another records with each one's own endpoint
and key, and each key reaches only its own upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from flowproof_cli.cassette.providers import (
    key_variable,
    unknown_provider_warnings,
    upstream_variable,
)
from flowproof_cli.cassette.upstream import (
    UPSTREAM_VARIABLES,
    Upstream,
    checked_base_url,
    checked_key,
    upstream_from_environment,
    upstream_timeout,
)
from flowproof_cli.providers import KEYLESS_PROVIDERS, PROVIDERS


@dataclass(frozen=True)
class Upstreams:
    """The default upstream (None when every provider the agent calls has its own) and the
    providers configured apart from it. A provider in neither has no upstream: its request
    fails the record, naming the variable to set."""

    default: Upstream | None
    own: Mapping[str, Upstream] = field(default_factory=dict)
    #: What the run's notes say about this configuration (a misspelt provider, a provider
    #: upstream with no key). Never a value: a key may be in it.
    notes: tuple[str, ...] = ()

    def for_provider(self, provider: str) -> Upstream | None:
        return self.own.get(provider, self.default)


def upstreams_from_environment(environ: Mapping[str, str]) -> Upstreams:
    """Every provider's upstream. ConfigError (exit 2) when none is set at all, or when a
    base URL or key is malformed (named by variable, never by value).

    A provider's own upstream takes its own key only: the default key goes to the default
    upstream (also for a provider that sets FLOWPROOF_KEY_<PROVIDER> without an upstream of
    its own, which keeps the default's base URL with its own key).
    """
    notes = list(unknown_provider_warnings(environ))
    bases = {p: checked_base_url(environ, upstream_variable(p)) for p in _set(environ, "UPSTREAM")}
    keys = {p: checked_key(environ, key_variable(p)) for p in _set(environ, "KEY")}
    has_default = any(environ.get(name) for name in UPSTREAM_VARIABLES)
    # Neither a default nor a provider's own: upstream_from_environment says what to set.
    default = upstream_from_environment(environ) if has_default or not bases else None
    timeout = upstream_timeout(environ)
    own: dict[str, Upstream] = {}
    for provider in PROVIDERS:
        base, key = bases.get(provider), keys.get(provider)
        if base is None and key is not None and default is not None:
            base = default.base_url
        if base is None:
            continue
        own[provider] = Upstream(base, key, timeout)
        if provider in bases and key is None and provider not in KEYLESS_PROVIDERS:
            notes.append(
                f"{upstream_variable(provider)} is set without {key_variable(provider)}: "
                f"{provider} requests go upstream with no key of flowproof's (the default key "
                "goes only to the default upstream)"
            )
    return Upstreams(default, own, tuple(notes))


def _set(environ: Mapping[str, str], kind: str) -> list[str]:
    """The providers whose FLOWPROOF_<kind>_<PROVIDER> variable is set (not empty)."""
    return [p for p in PROVIDERS if environ.get(f"FLOWPROOF_{kind}_{p.upper()}")]
