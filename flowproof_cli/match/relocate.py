"""Relocatable traces: the run's working directory and HOME stored as `{cwd}` and `{home}`.

A coding agent puts its checkout path and HOME into every request, and a model that read them
answers with absolute paths (`Read /home/ann/app/src/x.py`). Stored as placeholders, a trace
recorded on a laptop replays in CI: requests match whatever the live paths are, and the
recorded responses get the live paths back, so the agent's tool calls follow the checkout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from flowproof_cli.match.paths import map_strings

CWD = "{cwd}"
HOME = "{home}"
# A path is only replaced where it ends: `/home/ann` in `/home/ann/x` and at the end of a
# sentence (`... in /home/ann.`), not in `/home/anna` or `/home/ann.old`.
_PATH_END = r"(?![A-Za-z0-9_~-]|\.[A-Za-z0-9_~-])"


def _usable(path: str) -> bool:
    """A root-like path (`/`, `/tmp`) would rewrite text that merely mentions it."""
    return len(path.strip("/").split("/")[0]) > 0 and path.count("/") >= 1 and len(path) > 4


@dataclass(frozen=True)
class Relocation:
    cwd: str
    home: str

    def __post_init__(self) -> None:
        pairs = [(CWD, self.cwd.rstrip("/")), (HOME, self.home.rstrip("/"))]
        usable = sorted(
            ((name, path) for name, path in pairs if _usable(path)),
            key=lambda pair: -len(pair[1]),  # the longer (usually the checkout) first
        )
        object.__setattr__(self, "_pairs", tuple(usable))
        alternatives = "|".join(re.escape(path) for _, path in usable)
        pattern = re.compile(f"(?:{alternatives}){_PATH_END}") if usable else None
        object.__setattr__(self, "_pattern", pattern)
        object.__setattr__(self, "_names", {path: name for name, path in usable})

    def _placeholders_in(self, text: str) -> str:
        pattern: re.Pattern[str] | None = self._pattern  # type: ignore[attr-defined]
        if pattern is None:
            return text
        names: dict[str, str] = self._names  # type: ignore[attr-defined]
        return pattern.sub(lambda match: names[match.group(0)], text)

    def _live_in(self, text: str) -> str:
        if "{" not in text:
            return text
        return text.replace(CWD, self.cwd.rstrip("/")).replace(HOME, self.home.rstrip("/"))

    def to_placeholders(self, value: Any) -> tuple[Any, int]:
        """`value` with the live paths replaced by placeholders; how many strings changed."""
        return map_strings(value, self._placeholders_in)

    def to_live(self, value: Any) -> Any:
        """`value` with the placeholders replaced by this run's paths."""
        return map_strings(value, self._live_in)[0]

    def describe(self) -> str:
        pairs: tuple[tuple[str, str], ...] = self._pairs  # type: ignore[attr-defined]
        return ", ".join(f"{name}={path}" for name, path in pairs) or "nothing to relocate"
