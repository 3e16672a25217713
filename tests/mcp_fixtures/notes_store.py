"""The side effects shared by `py_server_v2.py` and `py_server_v1.py` (no `mcp` import here).

Every tool call a notes server executes appends one line to `NOTES_DIR/server.log`:

    tools/call <tool> <arguments as compact JSON, keys sorted>

so a test can prove that a call did (or never did) reach the real server.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

LOG_NAME = "server.log"


def notes_dir() -> Path:
    """The directory from env `NOTES_DIR`; exits with a clear error when it is unusable."""
    raw = os.environ.get("NOTES_DIR", "").strip()
    if not raw:
        sys.exit("notes server: set NOTES_DIR to the directory the notes are written to")
    path = Path(raw)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        sys.exit(f"notes server: NOTES_DIR={raw!r} is not a usable directory: {exc}")
    return path


def log_call(tool: str, arguments: dict[str, Any]) -> None:
    line = f"tools/call {tool} {json.dumps(arguments, sort_keys=True, separators=(',', ':'))}\n"
    with (notes_dir() / LOG_NAME).open("a", encoding="utf-8") as log:
        log.write(line)


def note_path(name: str) -> Path:
    """The file of note `name`; a name that leaves NOTES_DIR is refused."""
    base = notes_dir().resolve()
    path = (base / name).resolve()
    if path.parent != base or name == LOG_NAME:
        raise ValueError(f"invalid note name {name!r}: use a plain file name other than {LOG_NAME}")
    return path


def write_note(name: str, text: str) -> str:
    path = note_path(name)
    path.write_text(text, encoding="utf-8")
    return f"wrote {len(text.encode())} bytes to {name}"


def read_note(name: str) -> str:
    path = note_path(name)
    if not path.is_file():
        raise ValueError(f"no note named {name!r}")
    return path.read_text(encoding="utf-8")
