"""What of an agent's request never travels upstream: the credentials it holds.

The agent holds placeholders only (every provider's auth header, and a signature some
providers' clients make with placeholder credentials); record sends the provider's real
key or signature itself. Both boundaries that forward (HTTP and the WebSocket upgrade)
strip the same set, so neither can drift from the other.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from flowproof_cli.dialects import AUTH_HEADERS
from flowproof_cli.providers import DROPPED_HEADER_PREFIXES

#: Every dialect's auth header, the proxy's Host, and content negotiation flowproof does
#: not want to decode.
DROPPED_HEADERS = tuple(dict.fromkeys((*AUTH_HEADERS, "accept-encoding", "host")))


def drop_agent_credentials(headers: MutableMapping[str, str]) -> None:
    """Remove the agent's credentials (and its connection's encoding and host) in place."""
    for name in DROPPED_HEADERS:
        headers.pop(name, None)
    for name in [name for name in headers if name.lower().startswith(DROPPED_HEADER_PREFIXES)]:
        headers.pop(name, None)
