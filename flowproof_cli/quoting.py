"""Text from outside flowproof (a request path, an upstream's body, a server's line, an
exception) as an error message quotes it: control characters escaped, so no terminal escape
reaches the screen a verdict is printed on, and clipped, so one huge body cannot flood it.

At the bottom of the import graph: the addons, the model and MCP sessions and the stdio
stand-in all word their refusals with it. Names that only look alike (a Cyrillic letter, a
zero-width space) are told apart here too, for every message that shows two names as
different or proposes one (spec errors, assertion failures, divergences, re-record diffs).
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable

_DETAIL_LIMIT = 200


def printable(text: str) -> str:
    """`text` with every character that is not printable escaped (`\\x1b`, `\\n`)."""
    if text.isprintable():  # the usual case, on every request path: no per-character walk
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def quoted(raw: bytes | str, limit: int, *, encoding: str = "utf-8") -> str:
    """At most `limit` characters of `raw`, escaped, with `...` when there was more. Bytes are
    decoded with `encoding`, undecodable ones replaced."""
    text = raw if isinstance(raw, str) else raw.decode(encoding, "replace")
    return printable(text[:limit]) + ("..." if len(text) > limit else "")


def failure(exc: BaseException) -> str:
    """An exception as a message quotes it: its type and text, on one line, escaped, clipped."""
    text = " ".join(str(exc).split()) or "no detail"
    return f"{type(exc).__name__}: {quoted(text, _DETAIL_LIMIT)}"


def could_not_handle(path: str, exc: BaseException) -> str:
    """What the agent and the verdict are told when handling a request to `path` raised."""
    return (
        f"could not handle the request to {printable(path)} ({failure(exc)}); it was refused, "
        "not forwarded"
    )


# -- names that look alike ------------------------------------------------------------------
#
# A tool name with a Cyrillic `a` (U+0430) for the Latin one, or with a zero-width space in
# it, prints exactly like the name it is not. Wherever a message tells two names apart, or
# proposes one, the characters outside printable ASCII where they differ are shown by code
# point, and a name that only looks like another is never proposed as a name to write.

_MAX_POINTS = 5  # odd characters listed for one name at most
_SHORT = 400  # up to this length the differing parts are found exactly (difflib)
_LONG_WINDOW = 16  # a longer text: characters looked at from its first difference

#: Characters that draw nothing, besides the format characters (category Cf): fillers,
#: the combining grapheme joiner, variation selectors, the Braille blank.
_INVISIBLE = (
    frozenset((0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0))
    | frozenset(range(0xFE00, 0xFE10))
    | frozenset(range(0xE0100, 0xE01F0))
)

#: Letters of other scripts drawn like a Latin one (the common part of Unicode's confusables
#: for identifiers: Cyrillic, Greek, Armenian, Latin alpha and dotless i, dashes drawn like
#: `-`), by code point; NFKC already folds fullwidth, mathematical and ligature forms.
_LOOKS_LIKE: dict[str, str] = {
    chr(code): latin
    for latin, codes in (
        ("a", (0x0430, 0x03B1, 0x0251)),
        ("c", (0x0441, 0x03F2)),
        ("d", (0x0501,)),
        ("e", (0x0435,)),
        ("g", (0x0261, 0x0581)),
        ("h", (0x04BB, 0x0570)),
        ("i", (0x0456, 0x03B9, 0x0131, 0x0269)),
        ("j", (0x0458, 0x03F3)),
        ("l", (0x04CF, 0x01C0)),
        ("n", (0x0578,)),
        ("o", (0x043E, 0x03BF, 0x0585)),
        ("p", (0x0440, 0x03C1)),
        ("q", (0x051B, 0x0566)),
        ("s", (0x0455,)),
        ("u", (0x03C5, 0x057D)),
        ("v", (0x03BD,)),
        ("w", (0x051D,)),
        ("x", (0x0445, 0x03C7)),
        ("y", (0x0443, 0x03B3)),
        ("A", (0x0410, 0x0391)),
        ("B", (0x0412, 0x0392)),
        ("C", (0x0421, 0x03F9)),
        ("E", (0x0415, 0x0395)),
        ("H", (0x041D, 0x0397)),
        ("I", (0x0406, 0x04C0, 0x0399)),
        ("J", (0x0408, 0x037F)),
        ("K", (0x041A, 0x039A)),
        ("M", (0x041C, 0x039C)),
        ("N", (0x039D,)),
        ("O", (0x041E, 0x039F)),
        ("P", (0x0420, 0x03A1)),
        ("Q", (0x051A,)),
        ("S", (0x0405,)),
        ("T", (0x0422, 0x03A4)),
        ("W", (0x051C,)),
        ("X", (0x0425, 0x03A7)),
        ("Y", (0x0423, 0x04AE, 0x03A5)),
        ("Z", (0x0396,)),
        ("-", (0x2010, 0x2011, 0x2012, 0x2013, 0x2014, 0x2212)),
    )
    for code in codes
}


def _plain(char: str) -> bool:
    return " " <= char <= "~"


def invisible(char: str) -> bool:
    """A character that draws nothing: a zero-width space, a joiner, a bidi control, a filler."""
    return unicodedata.category(char) == "Cf" or ord(char) in _INVISIBLE


def skeleton(text: str) -> str:
    """What `text` looks like on screen, in plain letters where it can: NFKC-folded, invisible
    characters dropped, look-alike letters of other scripts replaced by the Latin ones."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(_LOOKS_LIKE.get(char, char) for char in folded if not invisible(char))


def looks_alike(text: str, other: str) -> bool:
    """Two different names a reader cannot tell apart on screen."""
    return text != other and skeleton(text) == skeleton(other)


def disguised(char: str) -> bool:
    """A character that hides what it is: invisible, or drawn like another (plain) one."""
    return invisible(char) or (not _plain(char) and skeleton(char) != char)


def unmasked(text: str) -> str:
    """`text` with every character that hides what it is written as its escape
    (`get_we\\u0430ther`, `get_\\u200bweather`), control characters escaped as `printable`
    does; other text (`caf\u00e9`, CJK) is left alone."""
    if all(_plain(char) for char in text):  # the usual case: no per-character lookups
        return text
    return "".join(
        _escape(char) if disguised(char) or not char.isprintable() else char for char in text
    )


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x80:
        return repr(char)[1:-1]  # \n, \t, \x1b
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def code_point(char: str) -> str:
    """`U+0430 CYRILLIC SMALL LETTER A`, or `U+0001` for a character with no name."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


def _disguise(char: str) -> str:
    """How a character hides on screen: invisible, drawn like a plain letter, or not."""
    if invisible(char):
        return ", which is invisible"
    looks = skeleton(char)
    if looks != char and all(_plain(c) for c in looks):
        return f", which looks like `{looks}`"
    return ""


def _differing(text: str, other: str) -> list[int]:
    """The positions of `text` in the parts where it differs from `other`: exactly for short
    texts, and for long ones a few characters from the first difference (no walk over MBs)."""
    if len(text) <= _SHORT and len(other) <= _SHORT:
        matcher = difflib.SequenceMatcher(None, text, other, autojunk=False)
        return [
            index
            for tag, start, end, _, _ in matcher.get_opcodes()
            if tag != "equal"
            for index in range(start, end)
        ]
    at = common_prefix(text, other)
    end = min(len(text), at + _LONG_WINDOW)
    return [i for i in range(at, end) if i >= len(other) or text[i] != other[i]]


def common_prefix(text: str, other: str) -> int:
    """The length of the common prefix, by halving (slice compares run in C: a 50 MB text
    costs milliseconds, not a character loop)."""
    low, high = 0, min(len(text), len(other))
    while low < high:
        middle = (low + high + 1) // 2
        if text[low:middle] == other[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def odd_characters(text: str, other: str) -> list[str]:
    """Each character outside printable ASCII where `text` differs from `other`, as
    `U+0430 CYRILLIC SMALL LETTER A at char 6, which looks like `a`` (0-based); at most
    five, then how many more."""
    odd = [index for index in _differing(text, other) if not _plain(text[index])]
    found = [
        f"{code_point(text[index])} at char {index}{_disguise(text[index])}"
        for index in odd[:_MAX_POINTS]
    ]
    if len(odd) > _MAX_POINTS:
        found.append(f"{len(odd) - _MAX_POINTS} more")
    return found


def named(text: str, other: str, quote: str = "") -> str:
    """`text` as a message shows it beside `other`: unmasked, between `quote`s, and when they
    differ in characters outside printable ASCII, with those listed:
    `get_we\\u0430ther (U+0430 CYRILLIC SMALL LETTER A at char 6, which looks like `a`)`."""
    return f"{quote}{unmasked(text)}{quote}{odd_note(text, other)}"


def odd_note(text: str, other: str) -> str:
    """` (U+0430 CYRILLIC SMALL LETTER A at char 6, which looks like `a`)` after a name that
    differs from `other` in characters outside printable ASCII; empty otherwise."""
    odd = odd_characters(text, other)
    return f" ({'; '.join(odd)})" if odd else ""


def shown(text: str, quote: str = "") -> str:
    """A name shown on its own: unmasked, with each character that hides what it is listed."""
    return named(text, skeleton(text), quote)


def closest_name(written: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name `written` most likely means: one it only looks like first (difflib
    cannot see that a Cyrillic letter is an `a`), else the closest by how both look."""
    by_look: dict[str, str] = {}
    for name in known:
        by_look.setdefault(skeleton(name), name)
    look = skeleton(written)
    if look in by_look:
        return by_look[look]
    close = difflib.get_close_matches(look, list(by_look), n=1, cutoff=cutoff)
    return by_look[close[0]] if close else None
