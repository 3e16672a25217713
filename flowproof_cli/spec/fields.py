"""Field shapes and checks the spec, suite and `match:` models share, declared once."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from flowproof_cli.process import NUL


def optional(description: str) -> Any:
    """An optional value, None when not given."""
    return Field(default=None, description=description)


def optional_text(description: str) -> Any:
    """An optional string that, when given, is not empty."""
    return Field(default=None, min_length=1, description=description)


def listed(description: str) -> Any:
    """A list that defaults to empty."""
    return Field(default_factory=list, description=description)


def optional_list(description: str) -> Any:
    """An optional non-empty list: None when not given; the schema shows only the list."""

    def only_the_list(schema: dict[str, Any]) -> None:
        schema.pop("anyOf", None)
        schema.pop("default", None)
        schema.update({"type": "array", "minItems": 1})

    return Field(default=None, description=description, json_schema_extra=only_the_list)


def optional_port(description: str) -> Any:
    """An optional TCP port number."""
    return Field(default=None, ge=1, le=65535, description=description)


def first_repeat(names: Iterable[str]) -> tuple[int, int] | None:
    """The index of the first name seen before, with the index where it was first seen."""
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in seen:
            return index, seen[name]
        seen[name] = index
    return None


# -- values that reach exec, a URL parser or JSON ----------------------------------------

#: How a NUL gets into a spec without being typed: YAML's escape in a double-quoted string.
NUL_FIX = "Fix: remove it (in a double-quoted YAML string, `\\0` and `\\x00` write one)"


def nul_problem(value: str, what: str, reaches: str = "exec cannot pass") -> str | None:
    """`what` holds a NUL, which `reaches` (exec ends every argument at it), or None."""
    if "\x00" not in value:
        return None
    return f"{what} holds the character {NUL}, which {reaches}. {NUL_FIX}"


def url_problem(url: str) -> str | None:
    """Why `url` is not an http(s) URL flowproof can dial, in words, or None."""
    if any(char.isspace() or not char.isprintable() for char in url):
        return "it holds a space or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is not a number from 0 to 65535)
    except ValueError as exc:
        if "IPv6" in str(exc):
            return "its IPv6 address is not closed with `]`"
        return "its port is not a number from 1 to 65535"
    if parts.scheme not in ("http", "https"):
        return f"its scheme is `{parts.scheme or '(none)'}`, not http or https"
    if not parts.hostname:
        return "it has no host"
    if parts.port == 0:
        return "its port is not a number from 1 to 65535"
    rest = url[url.index(parts.netloc) + len(parts.netloc) :]
    if not rest.isascii():
        return "its path or query holds text that is not ASCII (percent-encode it, e.g. %C3%BC)"
    try:
        parts.hostname.encode("idna")
    except UnicodeError:
        return "its host is not a name the DNS can carry"
    return None


def url_fix(example: str) -> str:
    return f"Fix: write e.g. {example} (an IPv6 host in brackets: http://[::1]:8000/...)"


def key_not_text(value: Any, at: tuple[str | int, ...] = ()) -> tuple[Any, tuple[Any, ...]] | None:
    """The first mapping key below `value` that is not text, with its path, or None: JSON
    keys are text, and a YAML key written `1`, `true` or `~` is a number, a bool or null."""
    if isinstance(value, dict):
        for key, child in value.items():
            if not isinstance(key, str):
                return key, (*at, key)
            found = key_not_text(child, (*at, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found = key_not_text(child, (*at, index))
            if found is not None:
                return found
    return None


def shown_key(key: Any) -> str:
    """A key that is not text, as YAML wrote it, with what YAML read it as."""
    if key is None:
        return "null (no value)"
    if isinstance(key, bool):
        return f"{str(key).lower()} (a boolean)"
    if isinstance(key, int | float):
        return f"{key!r} (a number)"
    return f"{key!r} (a {type(key).__name__})"


VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: `${NAME}`, `$NAME`, `NAME=...` and stray spaces: the name meant is still plain to see.
_NAME_MEANT = re.compile(r"\s*\$?\{?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}?\s*(=.*)?", re.S)


def not_a_variable_name(entry: str) -> str | None:
    """Why `entry` is not a POSIX variable name, showing the name meant when one shows; None
    for a name. Entries that name variables are never substituted, so `${X}` is no name."""
    if VARIABLE_NAME.fullmatch(entry):
        return None
    what = "is not a variable name (letters, digits and `_`, not starting with a digit)"
    meant = _NAME_MEANT.fullmatch(entry)
    words = [word for word in re.split(r"[\s,]+", entry) if word]
    if meant is not None:
        fix = f"Fix: write `{meant.group(1)}`"
        if meant.group(2) is not None:
            fix += ": only whether the variable is set (and not empty) is checked"
        elif "$" in entry:
            fix += ": an entry is the variable's name, never substituted"
    elif not entry.strip():
        what += ": it is empty"
        fix = "Fix: write the variable's name, e.g. `STAGING_URL`, or remove the entry"
    elif len(words) > 1 and all(VARIABLE_NAME.fullmatch(word) for word in words):
        fix = "Fix: one entry per variable: " + ", ".join(f"`{word}`" for word in words)
    elif entry[:1].isdigit():
        what += ": it starts with a digit"
        fix = "Fix: write the variable's name as it is exported (it cannot start with a digit)"
    else:
        fix = "Fix: write the variable's name as it is exported, e.g. `STAGING_URL`"
    return f"{what}. {fix}"


HEADER_FIX = (
    "Fix: give the header a one-line value of printable text (a value read from a file "
    "often keeps its final newline)"
)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def header_problem(name: str, value: str) -> str | None:
    """Why an HTTP header cannot be sent as written (a name that is not a token, a value with
    a line break, a control character or a character beyond Latin-1), or None. The value is
    never quoted: it may hold a secret."""
    if not _HEADER_NAME.fullmatch(name):
        return f"the header name {name!r} is not an HTTP token (letters, digits, `-`, no spaces)"
    if any(not (char == "\t" or " " <= char <= "~" or "\xa0" <= char <= "\xff") for char in value):
        return (
            f"the value of the header {name} holds a line break, a control character or a "
            "character no HTTP header carries (beyond Latin-1); it is not shown"
        )
    return None
