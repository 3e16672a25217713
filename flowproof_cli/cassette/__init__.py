"""The cassette: canonical turns, the match index, divergence reports, the live session."""

from flowproof_cli.cassette.divergence import Divergence
from flowproof_cli.cassette.session import CassetteSession, Forward, Mode, Upstream
from flowproof_cli.cassette.turn import Turn, canonical_json

__all__ = ["CassetteSession", "Divergence", "Forward", "Mode", "Turn", "Upstream", "canonical_json"]
