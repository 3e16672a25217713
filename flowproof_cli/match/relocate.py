"""Relocatable traces: the run's working directory and HOME stored as `{cwd}` and `{home}`.

A coding agent puts its checkout path and HOME into every request, and a model that read them
answers with absolute paths (`Read /home/ann/app/src/x.py`). Stored as placeholders, a trace
recorded on a laptop replays in CI: requests match whatever the live paths are, and the
recorded responses get the live paths back, so the agent's tool calls follow the checkout.
"""

from __future__ import annotations

import re
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


class Relocation:
    """The run's checkout and HOME, and the one pattern that finds either where a path ends."""

    def __init__(self, cwd: str, home: str):
        self.cwd = cwd.rstrip("/")
        self.home = home.rstrip("/")
        usable = sorted(
            ((name, path) for name, path in ((CWD, self.cwd), (HOME, self.home)) if _usable(path)),
            key=lambda pair: -len(pair[1]),  # the longer (usually the checkout) first
        )
        self._names = {path: name for name, path in usable}
        alternatives = "|".join(re.escape(path) for _, path in usable)
        self._pattern = re.compile(f"(?:{alternatives}){_PATH_END}") if usable else None

    def _placeholders_in(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda match: self._names[match.group(0)], text)

    def _live_in(self, text: str) -> str:
        if "{" not in text:
            return text
        return text.replace(CWD, self.cwd).replace(HOME, self.home)

    def to_placeholders(self, value: Any) -> tuple[Any, int]:
        """`value` with the live paths replaced by placeholders; how many strings changed."""
        return map_strings(value, self._placeholders_in)

    def to_live(self, value: Any) -> Any:
        """`value` with the placeholders replaced by this run's paths."""
        return map_strings(value, self._live_in)[0]

    def describe(self) -> str:
        pairs = ", ".join(f"{name}={path}" for path, name in self._names.items())
        return pairs or "nothing to relocate"
