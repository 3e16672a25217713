"""The variables that configure record's upstream for each provider.

A dialect names its provider (`Dialect.provider`, one of `PROVIDERS`); record forwards its
requests to that provider's upstream. Below the session and the environment reader alike,
so both name the variables in their messages without importing each other.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from flowproof_cli.providers import PROVIDERS

#: The upstream every provider without its own uses (the first one set).
DEFAULT_UPSTREAM_VARIABLES = ("FLOWPROOF_AGENT_UPSTREAM", "OPENAI_BASE_URL")
#: The key that goes with the default upstream (the first one set).
DEFAULT_KEY_VARIABLES = ("FLOWPROOF_AGENT_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
UPSTREAM_PREFIX = "FLOWPROOF_UPSTREAM_"
KEY_PREFIX = "FLOWPROOF_KEY_"
#: Variables that share a prefix above without naming a provider.
_NOT_PROVIDERS = frozenset({"FLOWPROOF_UPSTREAM_TIMEOUT"})


def upstream_variable(provider: str) -> str:
    """`FLOWPROOF_UPSTREAM_<PROVIDER>`."""
    return f"{UPSTREAM_PREFIX}{provider.upper()}"


def key_variable(provider: str) -> str:
    """`FLOWPROOF_KEY_<PROVIDER>`."""
    return f"{KEY_PREFIX}{provider.upper()}"


#: Every provider's own variables, upstreams then keys.
PROVIDER_UPSTREAM_VARIABLES = tuple(upstream_variable(p) for p in PROVIDERS)
PROVIDER_KEY_VARIABLES = tuple(key_variable(p) for p in PROVIDERS)


def unknown_provider_warnings(environ: Mapping[str, str]) -> list[str]:
    """One warning per FLOWPROOF_UPSTREAM_*/FLOWPROOF_KEY_* variable naming no provider
    (a typo would otherwise leave its provider on the default upstream, silently), each
    naming the nearest known variable. Never shows a value: a key may be in it."""
    warnings = []
    for name in sorted(environ):
        for prefix, known in (
            (UPSTREAM_PREFIX, PROVIDER_UPSTREAM_VARIABLES),
            (KEY_PREFIX, PROVIDER_KEY_VARIABLES),
        ):
            if not name.startswith(prefix) or name in known or name in _NOT_PROVIDERS:
                continue
            nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.0)[0]
            warnings.append(
                f"{name} names no provider flowproof knows, so it is ignored (did you mean "
                f"{nearest}?). Providers: {', '.join(p.upper() for p in PROVIDERS)}"
            )
    return warnings


def no_upstream_reason(provider: str, none_at_all: bool = False) -> str:
    """Why record could not forward a request of `provider`'s, naming what to set."""
    if none_at_all:
        return "record has no upstream configured"
    return (
        f"record has no upstream for {provider} requests: set {upstream_variable(provider)} to "
        f"the {provider} API's base URL (or FLOWPROOF_AGENT_UPSTREAM for every provider "
        "without its own) and record again"
    )
