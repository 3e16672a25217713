"""Every form a secret value takes in a message: raw, JSON-escaped, base64 and base64url at
each alignment, URL-encoded, hex; and the text of adjacent content parts, joined.

Two boundaries need them. The model boundary takes the record key out of an upstream answer
(`Upstream.without_key`) before the agent or the trace sees it, and the secret-leak scan
(`evidence/secrets.py`) searches a trajectory for declared values. Both must agree on what
"the value, encoded" means, so the forms live here, below both.

A model answer may cut its text into several content parts (Anthropic text blocks, Gemini
parts, OpenAI `output_text` entries), which a client joins into one text: a value cut
across two of them is in no single string, only in their join (`joined_parts`), so both the
removal (`without_across_parts`) and the scan read the join too.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

#: Shorter values would match by chance somewhere in a long message.
MIN_LENGTH = 8
_URLSAFE = str.maketrans("+/", "-_")


@dataclass(frozen=True)
class Needle:
    """One string to search for, and the encoding it stands for in a message."""

    text: str = field(repr=False)
    encoding: str


def _json_escaped(value: str) -> list[str]:
    """The value as it appears inside a JSON string (a tool's arguments are one)."""
    forms = [json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]]
    return forms + [form.replace("/", "\\/") for form in forms]


def base64_cores(data: bytes) -> list[str]:
    """For each alignment (the secret starts at byte offset 0, 1 or 2 of a 3-byte group of
    the encoded blob), the base64 characters fixed by the secret's bytes alone, whatever
    precedes or follows them. Padding is never part of a core."""
    cores = []
    for alignment in range(3):
        blob = base64.b64encode(bytes(alignment) + data + bytes(3)).decode()
        start = -(-8 * alignment // 6)  # first character whose 6 bits are all the secret's
        end = 8 * (alignment + len(data)) // 6
        cores.append(blob[start:end])
    return cores


def _url_encoded(value: str) -> list[str]:
    forms = [quote(value, safe=""), quote(value), quote_plus(value)]
    lowered = [_lower_escapes(form) for form in forms]
    return forms + lowered


def _lower_escapes(text: str) -> str:
    """`%2F` as `%2f`: some encoders write lowercase escapes."""
    parts = text.split("%")
    return parts[0] + "".join("%" + part[:2].lower() + part[2:] for part in parts[1:])


@functools.lru_cache(maxsize=64)
def needles(value: str) -> tuple[Needle, ...]:
    """Every form of `value` to search for, each string once (the first encoding wins).
    Cached: record takes the key out of every upstream answer with the same forms."""
    found: dict[str, str] = {}

    def add(text: str, encoding: str) -> None:
        if text and text not in found:
            found[text] = encoding

    add(value, "raw")
    for escaped in _json_escaped(value):
        add(escaped, "JSON-escaped")
    data = value.encode()
    for alignment, core in enumerate(base64_cores(data)):
        add(core, f"base64, alignment {alignment}")
        add(core.translate(_URLSAFE), f"base64url, alignment {alignment}")
    for encoded in _url_encoded(value):
        add(encoded, "URL-encoded")
    add(data.hex(), "hex")
    add(data.hex().upper(), "hex")
    return tuple(Needle(text, encoding) for text, encoding in found.items())


def without(raw: bytes, value: str, marker: bytes) -> bytes:
    """`raw` with every form of `value` replaced by `marker`, longest form first (a value
    shorter than MIN_LENGTH is left alone: it would match by chance)."""
    if len(value) < MIN_LENGTH:
        return raw
    for needle in sorted(needles(value), key=lambda n: -len(n.text)):
        raw = raw.replace(needle.text.encode(), marker)
    return raw


#: The field of a content part that holds its text, in every dialect: Anthropic text
#: blocks, Gemini parts, OpenAI content parts (`text`, `input_text`, `output_text`).
PART_TEXT = "text"
#: Cuts `without_across_parts` makes in one value at most (each removes one occurrence).
_MAX_CUTS = 1000


def text_parts(value: Any) -> list[dict[str, Any]]:
    """Every content part in a JSON value (a mapping whose `text` is a string), in document
    order: the pieces a client joins into one text."""
    found: list[dict[str, Any]] = []
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if isinstance(item.get(PART_TEXT), str):
                found.append(item)
            pending.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            pending.extend(reversed(item))
    return found


def joined_parts(value: Any) -> str | None:
    """The text of a value's content parts joined, when it has two or more."""
    parts = text_parts(value)
    return "".join(part[PART_TEXT] for part in parts) if len(parts) > 1 else None


def without_across_parts(value: Any, secret: str, marker: str) -> bool:
    """Take out of `value`, in place, every form of `secret` that spans two or more adjacent
    content parts: the part where it starts gets `marker` in place of its piece, the others
    lose theirs. Whether anything changed. (Within one part, `without` on the raw answer has
    taken it out already.)"""
    if len(secret) < MIN_LENGTH:
        return False
    forms = sorted((needle.text for needle in needles(secret)), key=len, reverse=True)
    for cuts in range(_MAX_CUTS):
        parts = text_parts(value)
        span = _spanning(parts, forms)
        if span is None:
            return cuts > 0
        _cut(parts, *span, marker)
    return True


def _spanning(parts: list[dict[str, Any]], forms: list[str]) -> tuple[int, int] | None:
    """The first occurrence of a form in the parts' join that crosses a part's end."""
    if len(parts) < 2:
        return None
    ends, offset = set(), 0
    for part in parts[:-1]:
        offset += len(part[PART_TEXT])
        ends.add(offset)
    joined = "".join(part[PART_TEXT] for part in parts)
    for form in forms:
        for start in _occurrences(joined, form):
            if any(start < end < start + len(form) for end in ends):
                return start, start + len(form)
    return None


def _occurrences(text: str, form: str) -> Iterator[int]:
    start = text.find(form)
    while start != -1:
        yield start
        start = text.find(form, start + 1)


def _cut(parts: list[dict[str, Any]], start: int, end: int, marker: str) -> None:
    """Remove [start, end) of the parts' join from the parts; `marker` where it began."""
    offset = 0
    for part in parts:
        text: str = part[PART_TEXT]
        low, high = offset, offset + len(text)
        offset = high
        a, b = max(start, low) - low, min(end, high) - low
        if a < b:
            part[PART_TEXT] = text[:a] + (marker if low <= start < high else "") + text[b:]
