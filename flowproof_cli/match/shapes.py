"""The shapes of values that move between two runs of an agent, as normalize rules.

`flowproof match learn` diffs two runs' requests and, for each span that differs, asks
which shape it has: a date in one of the forms the JavaScript and Python standard libraries
print, a time, a UUID, a hex id, an id with a fixed prefix (`call_...`), or a number or
token after text that stays the same. Each shape is a pattern that matches the span in both
runs, and a placeholder that no shape's pattern matches again, so a rule maps its own output
to itself (docs/matching.md). A span no shape covers is not guessed at: the learner ignores
its whole field instead, and says so.

Pure text functions over two strings: no requests, no files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DAY = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_DAY_LONG = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_MONTH = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_MONTH_LONG = (
    "(?:January|February|March|April|May|June|July|August|September|October|November|December)"
)
_CLOCK = r"\d{2}:\d{2}:\d{2}"


@dataclass(frozen=True)
class Shape:
    """A kind of volatile value: its name in reports, its pattern, its placeholder."""

    kind: str
    pattern: str
    replace: str

    @property
    def compiled(self) -> re.Pattern[str]:
        return _compiled(self.pattern)


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    found = _CACHE.get(pattern)
    if found is None:
        found = _CACHE[pattern] = re.compile(pattern)
    return found


#: Dates as the standard libraries print them, longest forms first (a form that contains
#: another is tried before it). Each is its own rule, so a learned rule names the one form
#: the agent prints.
DATES: tuple[Shape, ...] = (
    # JavaScript's Date.toString(): Thu Dec 03 2026 10:00:00 GMT+0000 (Coordinated Universal Time)
    Shape(
        "date (JavaScript Date.toString)",
        rf"\b{_DAY} {_MONTH} \d{{2}} \d{{4}} {_CLOCK} GMT[+-]\d{{4}}(?: \([^()]*\))?",
        "<date>",
    ),
    # JavaScript's toUTCString(), Python's email.utils.formatdate: Thu, 03 Dec 2026 10:00:00 GMT
    Shape(
        "date (RFC 1123, toUTCString)",
        rf"\b{_DAY}, \d{{2}} {_MONTH} \d{{4}} {_CLOCK}(?: GMT| [+-]\d{{4}})?",
        "<date>",
    ),
    # Python's time.ctime() and %c: Thu Dec  3 10:00:00 2026
    Shape("date (Python ctime)", rf"\b{_DAY} {_MONTH} [ \d]\d {_CLOCK} \d{{4}}\b", "<date>"),
    # ISO 8601 with a time: 2026-12-03T10:00:00.123Z, 2026-12-03 10:00:00+01:00
    Shape(
        "timestamp (ISO 8601)",
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
        "<timestamp>",
    ),
    # Thursday, December 3, 2026 (Intl's full date, Python's %A, %B %d, %Y)
    Shape(
        "date (weekday, month day, year)",
        rf"\b{_DAY_LONG}, {_MONTH_LONG} \d{{1,2}}, \d{{4}}\b",
        "<date>",
    ),
    # JavaScript's toDateString(): Thu Dec 03 2026
    Shape("date (JavaScript toDateString)", rf"\b{_DAY} {_MONTH} \d{{2}} \d{{4}}\b", "<date>"),
    # ISO 8601 date: 2026-12-03
    Shape("date (ISO 8601)", r"\b\d{4}-\d{2}-\d{2}\b", "<date>"),
    # December 3, 2026 / Dec 3, 2026
    Shape(
        "date (month day, year)",
        rf"\b(?:{_MONTH_LONG}|{_MONTH}\.?) \d{{1,2}}(?:st|nd|rd|th)?, \d{{4}}\b",
        "<date>",
    ),
    # 3 December 2026 / 3 Dec 2026
    Shape(
        "date (day month year)",
        rf"\b\d{{1,2}} (?:{_MONTH_LONG}|{_MONTH}\.?),? \d{{4}}\b",
        "<date>",
    ),
    # 12/3/2026 (toLocaleDateString en-US), 12/03/26 (Python's %x), 03.12.2026
    Shape("date (numeric)", r"\b\d{1,2}([/.])\d{1,2}\1(?:\d{4}|\d{2})\b", "<date>"),
)

TIME = Shape("time", r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[AP]M)?\b", "<time>")
UUID = Shape(
    "uuid",
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    "<uuid>",
)
#: The fixed shapes, tried in this order.
FIXED: tuple[Shape, ...] = (*DATES, UUID, TIME)

_SPECIAL = frozenset(".^$*+?{}[]\\|()")
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_PREFIX = re.compile(r"[A-Za-z]{2,}[_-]")
_CONTEXT_MAX = 24  # characters of unchanged text before a span a context rule anchors on


@dataclass(frozen=True)
class Found:
    """A shape that covers a differing span in both texts: the rule, and what it matched."""

    shape: Shape
    first: tuple[int, int]  # the match in the first run's text
    second: tuple[int, int]  # the match in the second run's text

    def values(self, first: str, second: str) -> tuple[str, str]:
        return first[slice(*self.first)], second[slice(*self.second)]

    def covers(self, span: tuple[int, int, int, int]) -> bool:
        """The span lies inside this match on both sides (a later part of the same date)."""
        a0, a1, b0, b1 = span
        return (
            self.first[0] <= a0
            and a1 <= self.first[1]
            and self.second[0] <= b0
            and b1 <= self.second[1]
        )


def literal(text: str) -> str:
    """`text` as a pattern matching it literally, escaping only what `re` gives a meaning
    (re.escape also escapes spaces and quotes, which a rule pasted into YAML would carry)."""
    return "".join(f"\\{char}" if char in _SPECIAL else char for char in text)


def _covering(pattern: re.Pattern[str], text: str, start: int, end: int) -> re.Match[str] | None:
    """The match of `pattern` in `text` that contains [start, end) (a point when equal)."""
    for match in pattern.finditer(text, max(0, start - 200), min(len(text), end + 200)):
        if match.start() <= start and end <= match.end() and match.end() > match.start():
            return match
    return None


def _fixed(first: str, span: tuple[int, int, int, int], second: str) -> Found | None:
    a0, a1, b0, b1 = span
    for shape in FIXED:
        in_first = _covering(shape.compiled, first, a0, a1)
        in_second = _covering(shape.compiled, second, b0, b1)
        # The same place: as far into the unchanged text before the span on both sides.
        if in_first and in_second and a0 - in_first.start() == b0 - in_second.start():
            return Found(shape, in_first.span(), in_second.span())
    return None


def _token(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The run of id characters ([A-Za-z0-9_-]) around [start, end), if the span lies in one."""
    for match in _TOKEN.finditer(text, max(0, start - 200), min(len(text), end + 200)):
        if match.start() <= start and end <= match.end():
            return match.span()
    return None


def _context(first: str, start_first: int, second: str, start_second: int) -> str:
    """The unchanged text right before both tokens (up to _CONTEXT_MAX characters, not
    across a line), or "" when it is too little to anchor a rule on."""
    length = 0
    while (
        length < _CONTEXT_MAX
        and length < start_first
        and length < start_second
        and first[start_first - length - 1] == second[start_second - length - 1]
        and first[start_first - length - 1] != "\n"
    ):
        length += 1
    context = first[start_first - length : start_first]
    usable = sum(1 for char in context if not char.isspace()) >= 3
    return context if usable and not context[-1].isalnum() else ""


def _shaped(first: str, a: tuple[int, int], second: str, b: tuple[int, int]) -> Found | None:
    """An id or a number, by its characters and what stays the same around it."""
    left, right = first[slice(*a)], second[slice(*b)]
    if left.isdigit() and right.isdigit():
        context = _context(first, a[0], second, b[0])
        if context:
            pattern = rf"(?<={literal(context)})\d+"
            return Found(Shape("number", pattern, "<n>"), a, b)
        return None
    prefix = _PREFIX.match(left)
    if prefix and right.startswith(prefix.group(0)) and len(left) > prefix.end() + 3:
        id_pattern = rf"\b{literal(prefix.group(0))}[A-Za-z0-9]+"
        if re.fullmatch(id_pattern, left) and re.fullmatch(id_pattern, right):
            return Found(Shape("id", id_pattern, f"{prefix.group(0)}<id>"), a, b)
    if len(left) == len(right) >= 8 and _HEX.fullmatch(left) and _HEX.fullmatch(right):
        letters = "a-f" if left.lower() == left and right.lower() == right else "A-F"
        pattern = rf"\b[0-9{letters}]{{{len(left)}}}\b"
        return Found(Shape("hex id", pattern, "<hex>"), a, b)
    context = _context(first, a[0], second, b[0])
    if context and len(left) >= 4 and len(right) >= 4:
        pattern = rf"(?<={literal(context)})[A-Za-z0-9_-]+"
        return Found(Shape("token", pattern, "<id>"), a, b)
    return None


def shape_of(first: str, span: tuple[int, int, int, int], second: str) -> Found | None:
    """The shape covering a differing span (first[a0:a1] against second[b0:b1]), or None.

    A fixed shape (a date form, a UUID, a time) must match both texts at the same place;
    otherwise the span must lie inside an id-like token on both sides: a number or token
    after the same context, an id with the same prefix, a hex id of the same length."""
    fixed = _fixed(first, span, second)
    if fixed is not None:
        return fixed
    a0, a1, b0, b1 = span
    a, b = _token(first, a0, a1), _token(second, b0, b1)
    if a is None or b is None or a[0] - a0 != b[0] - b0:
        return None
    return _shaped(first, a, second, b)


def token_around(text: str, start: int, end: int) -> str:
    """The id-like token a span lies in (the span itself when it lies in none)."""
    found = _token(text, start, end)
    return text[slice(*found)] if found else text[start:end]
