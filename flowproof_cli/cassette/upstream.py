"""Where record forwards to (`Upstream`), read from flowproof's own environment (never from a
request).

Below the runner and the model addon alike: both build a record session from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from flowproof_cli.cassette.providers import (
    DEFAULT_KEY_VARIABLES,
    DEFAULT_UPSTREAM_VARIABLES,
    PROVIDER_KEY_VARIABLES,
    PROVIDER_UPSTREAM_VARIABLES,
)
from flowproof_cli.cassette.secret_forms import MIN_LENGTH, without, without_across_parts
from flowproof_cli.dialects.base import Dialect, bare_key
from flowproof_cli.errors import ConfigError

#: The AWS secrets record signs forwarded Bedrock requests with (flowproof's own).
SIGNING_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
UPSTREAM_VARIABLES = DEFAULT_UPSTREAM_VARIABLES
KEY_VARIABLES = DEFAULT_KEY_VARIABLES
#: Every variable a record key is read from: the default's, then each provider's own. The
#: secret rules (never in the agent's environment, on disk or in output) hold for each.
RECORD_KEY_VARIABLES = (*DEFAULT_KEY_VARIABLES, *PROVIDER_KEY_VARIABLES, *SIGNING_VARIABLES)
#: Every variable naming where record forwards to: flowproof's own, never the agent's.
RECORD_UPSTREAM_VARIABLES = (*DEFAULT_UPSTREAM_VARIABLES, *PROVIDER_UPSTREAM_VARIABLES)
#: Seconds record waits for each upstream answer; `record --upstream-timeout` sets it.
TIMEOUT_VARIABLE = "FLOWPROOF_UPSTREAM_TIMEOUT"
#: Why a forwarded call got no answer when the agent itself went away first (the flow's
#: timeout stopped it, or its own client gave up).
CLIENT_GONE_REASON = "the agent closed its connection before the upstream model answered"

#: What replaces the record key in an upstream answer that echoes it.
KEY_REDACTED = b"[redacted]"

#: Seconds record waits for each answer of the upstream model (FLOWPROOF_UPSTREAM_TIMEOUT,
#: `record --upstream-timeout`): below the flow's default timeout, so a silent upstream ends
#: the record with its own message rather than the flow's.
DEFAULT_UPSTREAM_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Upstream:
    """The one real model endpoint record forwards to; fixed when the proxy starts."""

    base_url: str
    key: str | None = field(default=None, repr=False)  # a logged repr must not show it
    timeout_s: float = DEFAULT_UPSTREAM_TIMEOUT_S

    def for_provider(self, provider: str) -> Upstream | None:
        """One upstream alone serves every provider (`Upstreams` has one per provider)."""
        return self

    def url_for(self, dialect: Dialect, path: str) -> str:
        return dialect.upstream_url_for_path(self.base_url, path)

    def auth_headers(self, dialect: Dialect) -> dict[str, str]:
        """The key goes into the outbound auth header and nowhere else."""
        return dialect.upstream_auth(self.key) if self.key else {}

    def without_key(self, raw: bytes) -> bytes:
        """An upstream answer with the key taken out, in any common encoding (an upstream
        may echo it): neither the agent nor the trace ever holds it."""
        return without(raw, bare_key(self.key), KEY_REDACTED) if self.key else raw

    def without_key_across_parts(self, response: Any) -> bool:
        """The key taken out of a parsed answer where it spans adjacent content parts (an
        echo cut in two text blocks), in place; whether it was there."""
        if not self.key:
            return False
        return without_across_parts(response, bare_key(self.key), KEY_REDACTED.decode())

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc


def record_keys(environ: Mapping[str, str]) -> dict[str, str]:
    """The values of the variables flowproof reads a record key from, by variable, long
    enough to be told apart from ordinary text (shorter ones would match by chance)."""
    return {
        name: environ[name]
        for name in RECORD_KEY_VARIABLES
        if len(environ.get(name) or "") >= MIN_LENGTH
    }


def timeout_reason(seconds: float) -> str:
    """Why a forwarded call got no answer when the upstream stayed silent for `seconds`."""
    return (
        f"no answer within {seconds:g} s (set the wait with --upstream-timeout SECONDS or "
        f"{TIMEOUT_VARIABLE})"
    )


def upstream_from_environment(environ: Mapping[str, str]) -> Upstream:
    """The default upstream and its key: the first variable set, in documented order."""
    base_name = next((name for name in UPSTREAM_VARIABLES if environ.get(name)), None)
    if base_name is None:
        raise ConfigError(
            "record needs a real model to forward to: set FLOWPROOF_AGENT_UPSTREAM (or "
            "OPENAI_BASE_URL) to its OpenAI-compatible base URL, e.g. https://api.openai.com/v1 "
            "(or FLOWPROOF_UPSTREAM_<PROVIDER> for each provider the agent calls)"
        )
    base = checked_base_url(environ, base_name)
    key_name = next((name for name in KEY_VARIABLES if environ.get(name)), None)
    key = checked_key(environ, key_name) if key_name else None
    return Upstream(base_url=base, key=key, timeout_s=upstream_timeout(environ))


def checked_base_url(environ: Mapping[str, str], name: str) -> str:
    """The base URL variable `name` holds; ConfigError when it is not an http(s) URL."""
    base = environ[name]
    if not _is_base_url(base):  # its value is not shown: it may be a key exported there
        raise ConfigError(
            f"{name} is not an http(s) URL (its value is not shown, in case it is a key)"
            f"{_port_problem(base)}. Fix: set {name} to the model's base URL, e.g. "
            "https://api.openai.com/v1"
        )
    return base


def checked_key(environ: Mapping[str, str], name: str) -> str:
    """The key variable `name` holds; ConfigError when it would not travel as one header
    value as it is."""
    key = environ[name]
    if not _is_one_token(bare_key(key)):
        raise ConfigError(
            f"{name} holds a space, a line break or a control character, which would be "
            "sent as they are in the upstream auth header. Fix: export the key alone (a key "
            "read from a file often keeps its final newline)"
        )
    return key


def _is_one_token(text: str) -> bool:
    return bool(text) and all(" " < char < "\x7f" for char in text)


def _is_base_url(text: str) -> bool:
    """http(s), a host, a port flowproof can dial if one is given, and no space or control
    character (each would reach a header). A port out of range passed here and failed every
    request of the flow once the agent ran."""
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError:  # `http://[::1`
        return False
    if _port_problem(text):
        return False
    return parts.scheme in ("http", "https") and bool(host) and _is_one_token(text)


def _port_problem(text: str) -> str:
    """`: its port is not a number from 1 to 65535`, or empty (no port, a good one, or a
    URL that fails for another reason); never the value, which may be a key."""
    try:
        port = urlsplit(text).port
    except ValueError as exc:
        if "IPv6" in str(exc):  # `http://[::1`: not a port problem
            return ""
        port = 0
    return ": its port is not a number from 1 to 65535" if port == 0 else ""


def upstream_timeout(environ: Mapping[str, str]) -> float:
    """FLOWPROOF_UPSTREAM_TIMEOUT as seconds (unset or empty: the default)."""
    value = environ.get(TIMEOUT_VARIABLE)
    if not value:
        return DEFAULT_UPSTREAM_TIMEOUT_S
    seconds = parse_seconds(value)
    if seconds is None:
        raise ConfigError(
            f"{TIMEOUT_VARIABLE} is {value!r}: set it to the seconds record waits for each "
            f"answer of the upstream model, a number > 0 (e.g. {DEFAULT_UPSTREAM_TIMEOUT_S:g})"
        )
    return seconds


def parse_seconds(value: str) -> float | None:
    """A finite number of seconds > 0, or None (`nan`, `inf`, `0`, words)."""
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None
