"""The `dates` preset against the dates the JavaScript and Python standard libraries print.

The strings are made by node and by Python themselves, for several dates (single-digit
days, a new year, other weekdays) and today, not written by hand: every form the preset
names becomes `<date>`, wherever it stands in a sentence. Ordinary text (version numbers,
weekdays, numbers, paths) stays as it was.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.rules import MatchRules

#: Dates with a single-digit day and month, a two-digit one, a leap day and a new year.
DATES = (
    datetime.datetime(2026, 12, 3, 10, 15, 0),
    datetime.datetime(2027, 1, 21, 23, 5, 9),
    datetime.datetime(2025, 5, 9, 0, 0, 0),
    datetime.datetime(2028, 2, 29, 7, 30, 45),
    datetime.datetime.now().replace(microsecond=0),
)

#: What node prints for a date (Date.UTC fields), by each standard method and locale form.
NODE_FORMS = r"""
const forms = (d) => ({
  toDateString: d.toDateString(),
  toString: d.toString(),
  toUTCString: d.toUTCString(),
  toISOString: d.toISOString(),
  toJSON: d.toJSON(),
  "toLocaleDateString en-US": d.toLocaleDateString("en-US"),
  "toLocaleString en-US": d.toLocaleString("en-US"),
  "toLocaleDateString en-US long": d.toLocaleDateString("en-US",
    {weekday: "long", year: "numeric", month: "long", day: "numeric"}),
  "dateStyle full": d.toLocaleDateString("en-US", {dateStyle: "full"}),
  "dateStyle long": d.toLocaleDateString("en-US", {dateStyle: "long"}),
  "dateStyle medium": d.toLocaleDateString("en-US", {dateStyle: "medium"}),
  "dateStyle long, timeStyle short": d.toLocaleString("en-US",
    {dateStyle: "long", timeStyle: "short"}),
  "toLocaleDateString en-GB": d.toLocaleDateString("en-GB"),
  "en-GB full": d.toLocaleDateString("en-GB", {dateStyle: "full"}),
  "en-GB long": d.toLocaleDateString("en-GB", {dateStyle: "long"}),
});
const dates = JSON.parse(process.argv[1]);
console.log(JSON.stringify(dates.map(([y, m, d, h, i, s]) =>
  forms(new Date(Date.UTC(y, m - 1, d, h, i, s))))));
"""


def dates_rules() -> MatchRules:
    rules, _ = build_rules([Declared("spec", presets=("dates",))], cwd=Path("/"), home=None)
    return rules


def normalized(text: str) -> str:
    request: dict[str, Any] = {"messages": [{"role": "system", "content": text}]}
    return str(dates_rules().matched("openai-chat", request)["messages"][0]["content"])


def node_forms(timezone: str) -> list[tuple[str, str]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node for JavaScript's own date strings")
    fields = [[d.year, d.month, d.day, d.hour, d.minute, d.second] for d in DATES]
    done = subprocess.run(
        [node, "-e", NODE_FORMS, json.dumps(fields)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"TZ": timezone, "PATH": "/usr/bin:/bin"},
    )
    return [(name, text) for forms in json.loads(done.stdout) for name, text in forms.items()]


def python_forms() -> list[tuple[str, str]]:
    forms = []
    for d in DATES:
        stamp = d.replace(tzinfo=datetime.UTC).timestamp()
        forms += [
            ("date.today()", str(d.date())),
            ("datetime.now()", str(d)),
            ("datetime.now() with microseconds", str(d.replace(microsecond=123456))),
            ("isoformat()", d.isoformat()),
            ("aware isoformat()", d.replace(tzinfo=datetime.UTC).isoformat()),
            ("ctime()", d.ctime()),
            ("time.asctime()", time.asctime(d.timetuple())),
            ("%c", d.strftime("%c")),
            ("%A, %B %d, %Y", d.strftime("%A, %B %d, %Y")),
            ("%d %B %Y", d.strftime("%d %B %Y")),
            ("%b %d, %Y", d.strftime("%b %d, %Y")),
            ("%m/%d/%Y", d.strftime("%m/%d/%Y")),
            ("email.utils.formatdate()", email.utils.formatdate(stamp)),
            ("formatdate(usegmt=True)", email.utils.formatdate(stamp, usegmt=True)),
            ("format_datetime()", email.utils.format_datetime(d.replace(tzinfo=datetime.UTC))),
        ]
    return forms


@pytest.mark.parametrize("timezone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_every_javascript_date_form_is_a_date(timezone: str) -> None:
    for name, text in node_forms(timezone):
        assert normalized(f"Before {text}. After") == "Before <date>. After", (name, text)


def test_every_python_date_form_is_a_date() -> None:
    for name, text in python_forms():
        assert normalized(f"Before {text}. After") == "Before <date>. After", (name, text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the two the issue met: opencode's toDateString and Qwen Code's reminder
        ("Today's date: Thu Dec 03 2026", "Today's date: <date>"),
        ("The current date is: Thursday, December 3, 2026.", "The current date is: <date>."),
        # Python's `%x` (two-digit year) is a date only after a date phrase
        ("Today's date is 12/03/26.", "Today's date is <date>."),
        ("The date is 1/2/27", "The date is <date>"),
        ("Today is 3 December 2026", "Today is <date>"),
        ("current date: 2026-12-03", "current date: <date>"),
    ],
)
def test_date_sentences(text: str, expected: str) -> None:
    assert normalized(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Claude Code 2.1.332 and Node 20.20.2",
        "Thursday we ship; on Friday we rest.",
        "Meet on Dec 3 at noon",  # no year
        "3 December, the first snow",
        "12/3 of the tests passed, 1/2 of them flaky",
        "see https://example.com/api/12/3/2026/items and /v1/1/2/2026",
        "May I help? Sun 10:15",
        "1,234 items in 2026; call 555-12-2026",
        "Wed Dec",
        "Get the current date and time (UTC, ISO 8601).",
        "pages 1-12, ids 20261203, 2026/12/03-ish",
        "version 2026.8.31 of the server",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert normalized(text) == text


def test_the_replacement_maps_to_itself() -> None:
    """Rules also run on the stored (already normalized) side: `<date>` stays `<date>`."""
    once = normalized("Today's date: Thu Dec 03 2026, logged Thu, 03 Dec 2026 10:15:00 GMT")
    assert normalized(once) == once == "Today's date: <date>, logged <date>"


def test_two_days_read_the_same() -> None:
    day_one, day_two = DATES[0], DATES[0] + datetime.timedelta(days=1)
    texts = [
        f"Today's date: {d.strftime('%a %b %d %Y')}. It is {d.ctime()}; {d:%A, %B %-d, %Y}."
        for d in (day_one, day_two)
    ]
    assert normalized(texts[0]) == normalized(texts[1])
