"""Where record forwards to, read from flowproof's own environment (never from a request).

Below the runner and the model addon alike: both build a record session from it.
"""

from __future__ import annotations

from collections.abc import Mapping

from flowproof_cli.cassette.session import Upstream
from flowproof_cli.errors import ConfigError

UPSTREAM_VARIABLES = ("FLOWPROOF_AGENT_UPSTREAM", "OPENAI_BASE_URL")
KEY_VARIABLES = ("FLOWPROOF_AGENT_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")


def upstream_from_environment(environ: Mapping[str, str]) -> Upstream:
    """The fixed upstream and its key: the first variable set, in documented order."""
    base = next((environ[name] for name in UPSTREAM_VARIABLES if environ.get(name)), None)
    if not base:
        raise ConfigError(
            "record needs a real model to forward to: set FLOWPROOF_AGENT_UPSTREAM (or "
            "OPENAI_BASE_URL) to its OpenAI-compatible base URL, e.g. https://api.openai.com/v1"
        )
    if not base.startswith(("http://", "https://")):
        raise ConfigError(f"the upstream {base!r} is not an http(s) URL")
    key = next((environ[name] for name in KEY_VARIABLES if environ.get(name)), None)
    return Upstream(base_url=base, key=key)
