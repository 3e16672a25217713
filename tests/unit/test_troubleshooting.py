"""docs/troubleshooting.md quotes messages exactly as the code prints them: each heading's
constant parts (around the `{placeholders}`) must still occur in flowproof's source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGE = REPO / "docs" / "troubleshooting.md"
SOURCES = ("flowproof_cli", "addons")  # addons/ installs as flowproof_addons
#: Adjacent string literals split over lines (`"... "\n    f"..."`): joined, as Python does.
_CONTINUATION = re.compile(r"""(["'])\s*\n\s*(?:rf|fr|f|r)?\1""")
_PLACEHOLDER = re.compile(r"\{[^}]*\}")


def _source_text() -> str:
    files = [path for root in SOURCES for path in sorted((REPO / root).rglob("*.py"))]
    joined = "\n".join(path.read_text(encoding="utf-8") for path in files)
    return _CONTINUATION.sub("", joined)


def headings(page: Path = PAGE) -> list[str]:
    return [
        line[3:] for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("## ")
    ]


def fragments(message: str) -> list[str]:
    """The constant parts of a quoted message (a known label such as `FAIL: ` aside)."""
    message = message.removeprefix("FAIL: ")
    return [part for part in (p.strip() for p in _PLACEHOLDER.split(message)) if len(part) >= 4]


SOURCE = _source_text()


def test_the_page_has_entries() -> None:
    assert len(headings()) >= 10


@pytest.mark.parametrize("message", headings())
def test_each_quoted_message_occurs_in_the_source(message: str) -> None:
    missing = [part for part in fragments(message) if part not in SOURCE]
    assert not missing, f"docs/troubleshooting.md quotes {message!r}; not in the source: {missing}"


def test_a_message_the_code_no_longer_prints_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "troubleshooting.md"
    page.write_text("# T\n\n## no trace at {trace}; please record it soon\n")
    (message,) = headings(page)
    assert fragments(message) == ["no trace at", "; please record it soon"]
    assert [part for part in fragments(message) if part not in SOURCE] == [
        "; please record it soon"
    ]
