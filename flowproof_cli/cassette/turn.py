"""A recorded turn: one model request (canonical) and the response to replay for it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from flowproof_cli.canonical import canonical_json

__all__ = ["Turn", "canonical_json", "match_key"]


@dataclass(frozen=True)
class Turn:
    protocol: str
    request: dict[str, Any]  # canonical request: transport fields removed, mocks applied
    status: int
    response: Any  # the upstream's JSON body (a str when it was not JSON)

    @property
    def match_key(self) -> str:
        return match_key(self.protocol, self.request)


def match_key(protocol: str, request: dict[str, Any]) -> str:
    """The index key: protocol and canonical body, hashed."""
    digest = hashlib.sha256(f"{protocol}\n{canonical_json(request)}".encode())
    return digest.hexdigest()
