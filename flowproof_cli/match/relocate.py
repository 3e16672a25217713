"""Relocatable traces: the run's working directory and HOME stored as `{cwd}` and `{home}`.

A coding agent puts its checkout path and HOME into every request, and a model that read them
answers with absolute paths (`Read /home/ann/app/src/x.py`). Stored as placeholders, a trace
recorded on a laptop replays in CI: requests match whatever the live paths are, and the
recorded responses get the live paths back, so the agent's tool calls follow the checkout.

Some agents also name a file under HOME by its path relative to the working directory (Qwen
Code: `Context from: ../home-ann/.qwen/output-language.md`). That path is HOME as seen from
the checkout, and it is stored as `{cwd-to-home}`; see `_relative_home` for which forms.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from flowproof_cli.match.paths import map_strings

CWD = "{cwd}"
HOME = "{home}"
#: HOME written relative to the working directory (`../home-ann`, `../..`).
CWD_TO_HOME = "{cwd-to-home}"
# A path is only replaced where it ends: `/home/ann` in `/home/ann/x` and at the end of a
# sentence (`... in /home/ann.`), not in `/home/anna` or `/home/ann.old`.
_PATH_END = r"(?![A-Za-z0-9_~-]|\.[A-Za-z0-9_~-])"
# A relative path only starts where no path does (`x/../h` and `a../h` are not it).
_PATH_START = r"(?<![A-Za-z0-9_.~/-])"
# A hidden entry right under the folder (`/.qwen`, `/.config`): where agents keep their state.
_HIDDEN_ENTRY = r"(?=/\.[A-Za-z0-9_-])"


def _usable(path: str) -> bool:
    """A root-like path (`/`, `/tmp`) would rewrite text that merely mentions it."""
    return len(path.strip("/").split("/")[0]) > 0 and path.count("/") >= 1 and len(path) > 4


def _relative_home(cwd: str, home: str) -> tuple[str, str] | None:
    """HOME relative to the working directory, and the pattern that finds it written so, or
    None when that form cannot be told from other text.

    - HOME beside or away from the checkout (`/tmp/a/proj` and `/tmp/h`: `../../h`): the
      relative path names HOME's own folder, so it is found wherever a path starts and ends
      there, like the absolute paths (`../../h/.qwen/x`, not `../../hx` or `x/../../h`).
    - HOME above the checkout (`/home/ann/app` and `/home/ann`: `..`): every `../x` leads into
      HOME, and most are the checkout's siblings (`import '../lib/x'`), which must stay as
      written. Only a hidden entry right under HOME is taken (`../.qwen/x`): where agents
      keep their state, and rarely a sibling of a checkout.
    - HOME in the checkout, or the checkout itself: no `..`, nothing relative to find.
    """
    if not (_usable(cwd) and _usable(home)):
        return None
    relative = posixpath.relpath(home, cwd)
    segments = relative.split("/")
    if segments[0] != "..":
        return None
    escaped = re.escape(relative)
    if all(segment == ".." for segment in segments):
        return relative, f"{_PATH_START}{escaped}{_HIDDEN_ENTRY}"
    return relative, f"{_PATH_START}{escaped}{_PATH_END}"


class Relocation:
    """The run's checkout and HOME, and the one pattern that finds either where a path ends
    (and HOME written relative to the checkout)."""

    def __init__(self, cwd: str, home: str):
        self.cwd = cwd.rstrip("/")
        self.home = home.rstrip("/")
        usable = sorted(
            ((name, path) for name, path in ((CWD, self.cwd), (HOME, self.home)) if _usable(path)),
            key=lambda pair: -len(pair[1]),  # the longer (usually the checkout) first
        )
        self._names = {path: name for name, path in usable}
        alternatives = [f"(?:{re.escape(path)}){_PATH_END}" for _, path in usable]
        relative = _relative_home(self.cwd, self.home)
        # What `{cwd-to-home}` becomes in a recorded response: HOME from here, whatever form.
        both = _usable(self.cwd) and _usable(self.home)
        self.home_from_cwd = posixpath.relpath(self.home, self.cwd) if both else None
        if relative is not None:
            self._names[relative[0]] = CWD_TO_HOME
            alternatives.append(relative[1])
        self._pattern = re.compile("|".join(alternatives)) if alternatives else None

    def _placeholders_in(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda match: self._names[match.group(0)], text)

    def _live_in(self, text: str) -> str:
        if "{" not in text:
            return text
        if self.home_from_cwd is not None:
            text = text.replace(CWD_TO_HOME, self.home_from_cwd)
        return text.replace(CWD, self.cwd).replace(HOME, self.home)

    def to_placeholders(self, value: Any) -> tuple[Any, int]:
        """`value` with the live paths replaced by placeholders; how many strings changed."""
        return map_strings(value, self._placeholders_in)

    def to_live(self, value: Any) -> Any:
        """`value` with the placeholders replaced by this run's paths."""
        return map_strings(value, self._live_in)[0]

    def describe(self) -> str:
        """The absolute paths only: `{cwd-to-home}` follows from them."""
        pairs = ", ".join(
            f"{name}={path}" for path, name in self._names.items() if name != CWD_TO_HOME
        )
        return pairs or "nothing to relocate"
