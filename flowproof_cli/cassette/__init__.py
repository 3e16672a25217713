"""The cassette: canonical turns, the match index, divergence reports, the live session.

Names load lazily, so a light user of one submodule (the MCP stand-in reads
`cassette.diff`) does not pay for the session, the dialects and their imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flowproof_cli.mode import Mode

if TYPE_CHECKING:
    from flowproof_cli.cassette.divergence import Divergence
    from flowproof_cli.cassette.forward import Forward
    from flowproof_cli.cassette.session import CassetteSession
    from flowproof_cli.cassette.turn import Turn, canonical_json
    from flowproof_cli.cassette.upstream import Upstream

_HOMES = {
    "Divergence": "divergence",
    "CassetteSession": "session",
    "Forward": "forward",
    "Upstream": "upstream",
    "Turn": "turn",
    "canonical_json": "turn",
}

__all__ = ["CassetteSession", "Divergence", "Forward", "Mode", "Turn", "Upstream", "canonical_json"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
