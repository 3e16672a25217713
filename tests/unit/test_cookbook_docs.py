"""docs/agents.md shows the cookbook's files verbatim, so the docs cannot rot.

A code block right after a `<!-- file: PATH -->` line must equal the file at PATH (relative
to the repository), and every cookbook spec must be shown that way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

DOC = REPO / "docs" / "agents.md"
COOKBOOK = REPO / "tests" / "e2e" / "cookbook"
MARKER = re.compile(r"^<!-- file: (\S+) -->$")
FENCE = re.compile(r"^```")


@dataclass(frozen=True)
class FileBlock:
    path: str
    line: int  # of the marker, 1-based
    text: str | None  # None: no code block follows the marker


def file_blocks(markdown: str) -> list[FileBlock]:
    """Every marked block: the marker's path and line, and the block's text."""
    lines = markdown.splitlines()
    blocks = []
    for index, line in enumerate(lines):
        if not (marker := MARKER.match(line)):
            continue
        text = None
        if index + 1 < len(lines) and FENCE.match(lines[index + 1]):
            end = next((j for j in range(index + 2, len(lines)) if lines[j] == "```"), len(lines))
            text = "\n".join(lines[index + 2 : end]) + "\n"
        blocks.append(FileBlock(marker.group(1), index + 1, text))
    return blocks


def stale_blocks(markdown: str, root: Path, doc_name: str = "docs/agents.md") -> list[str]:
    """One message per marked block that is not its file, verbatim."""
    problems = []
    for block in file_blocks(markdown):
        where = f"{doc_name}:{block.line}"
        path = root / block.path
        if block.text is None:
            problems.append(f"{where}: no code block follows the marker for {block.path}")
        elif not path.is_file():
            problems.append(f"{where}: {block.path} does not exist")
        elif path.read_text() != block.text:
            problems.append(
                f"{where}: the block differs from {block.path}. Fix: paste the file again"
            )
    return problems


def test_every_marked_block_is_its_file_verbatim() -> None:
    assert stale_blocks(DOC.read_text(), REPO) == []


def test_every_cookbook_spec_and_agent_is_shown() -> None:
    shown = {block.path for block in file_blocks(DOC.read_text())}
    patterns = ("*/weather.flow.yaml", "*/agent.*", "*/tools.py", "suite.yaml", "*/suite.yaml")
    expected = {
        str(path.relative_to(REPO)) for pattern in patterns for path in COOKBOOK.glob(pattern)
    }
    # fifteen specs; fourteen agents (twelve agent.py, Mastra's agent.mjs, aider's
    # agent.sh); llm's tools; the suite, aider's and Ollama's
    assert len(expected) == 33
    assert expected <= shown, f"not shown in docs/agents.md: {sorted(expected - shown)}"


def test_the_coding_cli_section_stays_last() -> None:
    headings = [line for line in DOC.read_text().splitlines() if line.startswith("## ")]
    assert headings[-1] == "## Coding CLIs"


def test_an_edited_block_is_reported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text("name: x\napp: agent\n")
    markdown = "intro\n<!-- file: spec.yaml -->\n```yaml\nname: y\napp: agent\n```\n"
    assert stale_blocks(markdown, tmp_path) == [
        "docs/agents.md:2: the block differs from spec.yaml. Fix: paste the file again"
    ]
    fixed = markdown.replace("name: y", "name: x")
    assert stale_blocks(fixed, tmp_path) == []


def test_a_marker_without_a_block_or_a_file_is_reported(tmp_path: Path) -> None:
    markdown = "<!-- file: gone.yaml -->\n```yaml\na: 1\n```\n\n<!-- file: lonely.yaml -->\ntext\n"
    assert stale_blocks(markdown, tmp_path) == [
        "docs/agents.md:1: gone.yaml does not exist",
        "docs/agents.md:6: no code block follows the marker for lonely.yaml",
    ]
