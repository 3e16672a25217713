"""docs/getting-started.md: every command it shows runs, in its order, in a temporary copy.

The ```sh blocks become one bash script. Each line must exit 0, or the code its trailing
`# exits N` says. `cd` and `export` carry over, as in the reader's shell. Recording goes to
the fake model upstream instead of OpenAI, and the `sk-...` placeholder becomes a dummy key.
Nothing else is changed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_environ
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

PAGE = REPO / "docs" / "getting-started.md"
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
_EXPECTED = re.compile(r"\s+# exits (\d+)$")


def commands(page: Path = PAGE) -> list[tuple[str, int]]:
    """(command line, expected exit code), in the page's order."""
    lines = [line for block in _BLOCK.findall(page.read_text()) for line in block.splitlines()]
    found = []
    for line in filter(str.strip, lines):
        expected = _EXPECTED.search(line)
        found.append((_EXPECTED.sub("", line), int(expected.group(1)) if expected else 0))
    return found


def script(steps: list[tuple[str, int]], upstream: str) -> str:
    checked = []
    for number, (line, expected) in enumerate(steps, 1):
        line = line.replace("https://api.openai.com/v1", upstream).replace("sk-...", "k")
        checked.append(
            f"{line}\nrc=$?\nif [ $rc -ne {expected} ]; then echo "
            f"{shlex.quote(f'step {number} exited ')}$rc{shlex.quote(f', not {expected}: {line}')}"
            " >&2; exit 1; fi"
        )
    return "\n".join(checked) + "\n"


def test_the_page_shows_the_first_five_minutes() -> None:
    shown = [line for line, _ in commands()]
    assert any(line.startswith("flowproof init --agent") for line in shown)
    assert any("flowproof record" in line for line in shown)
    assert ("flowproof run examples/agent-demo/weather.flow.yaml", 1) in commands()


def test_every_command_on_the_page_runs(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(
        REPO / "examples", checkout / "examples", ignore=shutil.ignore_patterns(".flowproof")
    )
    (checkout / ".venv").symlink_to(REPO / ".venv")
    with FakeUpstream(seed=1) as fake:
        done = subprocess.run(
            ["bash", "-c", script(commands(), f"{fake.base_url}/v1")],
            cwd=checkout,
            env=clean_environ(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "OK: the agent's model client reaches flowproof's proxy" in done.stdout
    assert "divergence at turn 1: message 1 (user) content changed" in done.stdout
    trace = checkout / "examples" / "agent-demo" / "my-weather.trace.yaml"
    assert "What is the weather in Nairobi?" in trace.read_text()


def test_a_command_that_fails_unexpectedly_stops_the_script(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\ntrue\nfalse\necho never\n```\n")
    done = subprocess.run(
        ["bash", "-c", script(commands(page), "http://127.0.0.1:9")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "step 2 exited 1, not 0: false" in done.stderr
    assert "never" not in done.stdout
