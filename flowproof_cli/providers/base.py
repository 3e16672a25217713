"""The provider contract: what a provider's clients need to reach flowproof, and what record
needs to reach the provider.

A dialect says what a provider speaks (its wire format, `flowproof_cli/dialects/`); a
provider says who it is around that: the variables its own clients read to find their
endpoint, the placeholder credentials that let them start with no real key, what the agent
must never inherit, and how record authenticates what it forwards when a key in a header
is not enough (a signature over the request). The runner, the addons and the session read
these through the registry (`flowproof_cli/providers/__init__.py`) and know no provider by
name, so a new provider is one module here plus its dialect, each with its registration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

#: The placeholder an agent's client holds in place of any API key: the proxy drops it
#: and, at record, sends the real key itself.
PLACEHOLDER_KEY = "flowproof-placeholder-key"


@dataclass(frozen=True)
class ProxyAddress:
    """Where the flow's proxy listens: `root` (no `/v1`, for clients that append their
    API's whole path) and `v1` (for clients that append to `/v1`)."""

    root: str

    @property
    def v1(self) -> str:
        return f"{self.root}/v1"

    @classmethod
    def on_port(cls, port: int) -> ProxyAddress:
        return cls(f"http://127.0.0.1:{port}")


class UpstreamSigner(Protocol):
    """Authenticates one request record forwards, for a provider that checks a signature
    over the request instead of (or beside) a key in a header."""

    def headers_for(
        self, url: str, body: bytes, key_headers: Mapping[str, str], what: str
    ) -> dict[str, str] | str:
        """The headers the forward travels with, or why it can have none (the record fails
        on that text). `key_headers` is the dialect's `upstream_auth` of the record key,
        empty when none is set; `what` names the call in a message."""
        ...


@dataclass(frozen=True)
class Provider:
    """One provider. Every field is data the registry serves; the methods have defaults
    that most providers keep."""

    #: Lower case; its upper-case form names its record variables (FLOWPROOF_UPSTREAM_AZURE).
    name: str
    #: Base-URL variables its clients read, set to the proxy's root (no `/v1`).
    root_url_variables: tuple[str, ...] = ()
    #: Base-URL variables set to the proxy's `/v1` (clients that append the rest to it).
    v1_url_variables: tuple[str, ...] = ()
    #: Placeholder credentials, so a client that refuses to start without one starts.
    placeholders: Mapping[str, str] = field(default_factory=dict)
    #: Set only when the agent's environment has none: the user's own choice is kept.
    defaults: Mapping[str, str] = field(default_factory=dict)
    #: Never inherited by the agent: flowproof's own credentials, and anything that would
    #: win over the placeholders (a profile naming real ones).
    withheld_variables: tuple[str, ...] = ()
    #: Of flowproof's own variables, those whose values are secrets: every flow scans for
    #: and redacts them like the record keys.
    secret_variables: tuple[str, ...] = ()
    #: Record forwards its calls with no key of flowproof's (signed, or none needed), so a
    #: provider upstream without FLOWPROOF_KEY_<PROVIDER> is no cause for a note.
    keyless: bool = False
    #: Header-name prefixes of the agent's own that never travel upstream (a signature the
    #: agent made with its placeholder credentials).
    dropped_header_prefixes: tuple[str, ...] = ()

    def agent_variables(self, inherited: Mapping[str, str], proxy: ProxyAddress) -> dict[str, str]:
        """The variables the agent gets: base URLs, placeholders, and the defaults it does
        not inherit (`inherited`: its environment as it stands, flowproof's own secrets
        already gone)."""
        variables = dict.fromkeys(self.root_url_variables, proxy.root)
        variables.update(dict.fromkeys(self.v1_url_variables, proxy.v1))
        variables.update(self.placeholders)
        variables.update({k: v for k, v in self.defaults.items() if not inherited.get(k)})
        return variables

    def agent_files(self, folder: str) -> dict[str, str]:
        """Private files its clients need (name in `folder` -> content, written 0600 before
        the agent starts), each named by a variable `file_variables` sets."""
        return {}

    def file_variables(self, folder: str) -> dict[str, str]:
        """The variables naming the files `agent_files` wrote into `folder`."""
        return {}

    def upstream_signer(self, environ: Mapping[str, str]) -> UpstreamSigner | None:
        """Record's signer, read once from flowproof's own environment (`environ`), or None
        when a key in a header is all the provider takes. Raises ConfigError (exit 2) when
        the environment says what to sign with only in part."""
        return None

    def unknown_path_hint(self, path: str, headers: Mapping[str, str]) -> str:
        """What its client did wrong, when it sent a request no dialect speaks (empty when
        the request is none of its clients')."""
        return ""
