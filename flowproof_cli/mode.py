"""The one switch every boundary reads: record real traffic, or replay it from a cassette."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    RECORD = "record"
    REPLAY = "replay"
