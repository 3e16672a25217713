"""The committed example flows replay offline (what `make demo` runs), and can still fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli, run_command

pytestmark = pytest.mark.slow

# The examples call a bare `python`, as a user's spec would: the venv's comes first.
VENV_PATH = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
NODE_MODULES = REPO / "tests" / "node_modules"
#: The Node and Claude Code examples need tests/node_modules (as `make demo` gives them).
HAS_NODE = (NODE_MODULES / ".bin" / "claude").exists() and shutil.which("node") is not None
DEMO_ENV = VENV_PATH | ({"EXAMPLES_NODE_MODULES": str(NODE_MODULES)} if HAS_NODE else {})
needs_node = pytest.mark.skipif(not HAS_NODE, reason="tests/node_modules is not installed")


def _copy_examples(tmp_path: Path) -> Path:
    """The examples at another path (their traces and agents with them, no run records)."""
    copy = tmp_path / "examples"
    # not examples/node_modules (`make demo` fills it): the copy runs with tests/node_modules
    shutil.copytree(
        REPO / "examples", copy, ignore=shutil.ignore_patterns(".flowproof", "node_modules")
    )
    return copy


def test_committed_examples_replay_offline() -> None:
    result = run_cli("run", REPO / "examples", env=DEMO_ENV)
    assert result.code == 0, result.output
    passed = 9 if HAS_NODE else 7
    assert result.stdout.count("PASS: ") == passed
    assert f"{passed} passed, 0 failed, {9 - passed} skipped" in result.stdout
    # A passing flow of a directory run shows no tier or notes (that is -v): what good looks like.
    assert "egress containment:" not in result.stdout
    assert "note: " not in result.stdout


def test_the_examples_follow_the_practices_the_warnings_recommend() -> None:
    """No example prints a warning: each uses what the warnings recommend (a tool answered
    under `mcp:`, or a read-only clock compared through a declared `match:` rule)."""
    result = run_cli("run", REPO / "examples", "-v", env=DEMO_ENV)
    assert result.code == 0, result.output
    blocks = result.stdout.split("PASS: ")[1:]
    assert len(blocks) == (9 if HAS_NODE else 7), result.stdout
    for block in blocks:
        assert "warning:" not in block, block
        assert "egress containment:" in block  # -v shows the detail again
    (weather,) = [block for block in blocks if block.startswith("Weather agent reports")]
    assert "(preset dates): 1 field(s) on 1 request(s)" in weather  # the clock, relaxed


def test_quiet_keeps_only_the_verdicts() -> None:
    result = run_cli("run", REPO / "examples", "--quiet", env=DEMO_ENV)
    assert result.code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(line.startswith(("PASS: ", "SKIP: ")) for line in lines[:-1]), result.stdout
    assert lines[-1].endswith("0 failed, " + ("0" if HAS_NODE else "2") + " skipped")


def test_the_guard_path_fails_when_the_guard_is_removed(tmp_path: Path) -> None:
    examples = _copy_examples(tmp_path)
    agent = examples / "guard-demo" / "guarded_agent.py"
    agent.write_text(agent.read_text().replace('frozenset({"delete_city"})', "frozenset()"))
    result = run_cli("run", examples / "guard-demo" / "guard.flow.yaml", env=VENV_PATH)
    assert result.code == 1, result.output
    assert "divergence at turn 1: tools offered changed: added delete_city" in result.stdout


def test_the_mcp_example_replays_without_its_server(tmp_path: Path) -> None:
    examples = _copy_examples(tmp_path)
    server = examples / "mcp-demo" / "weather_server.py"
    server.write_text("raise SystemExit('the real MCP server must not start at replay')\n")
    result = run_cli("run", examples / "mcp-demo" / "weather.flow.yaml", env=VENV_PATH)
    assert result.code == 0, result.output
    assert "mcp: weather 4 call(s)" in result.stdout
    assert "warning:" not in result.stdout  # get_time and delete_city are intercepted


@needs_node
def test_the_node_example_fails_on_an_edited_prompt(tmp_path: Path) -> None:
    examples = _copy_examples(tmp_path)
    spec = examples / "node-demo" / "weather.flow.yaml"
    spec.write_text(spec.read_text().replace("in Accra today", "in Lagos today"))
    result = run_cli("run", spec, env=DEMO_ENV)
    assert result.code == 1, result.output
    assert "divergence at turn 1: message 1 (user) content changed" in result.stdout


def test_the_node_and_claude_examples_skip_without_node_modules() -> None:
    result = run_cli("run", REPO / "examples" / "node-demo", env=VENV_PATH)
    assert result.code == 0, result.output
    assert "SKIP: Node agent (npm openai, streamed) checks the weather in Accra - not set: " in (
        result.stdout
    )


def test_an_edited_example_fails_with_a_divergence(tmp_path: Path) -> None:
    demo = tmp_path / "agent-demo"
    shutil.copytree(REPO / "examples" / "agent-demo", demo)
    spec = demo / "weather.flow.yaml"
    spec.write_text(spec.read_text().replace("in Nairobi right now", "in Paris right now"))
    result = run_cli("run", spec, env=VENV_PATH)
    assert result.code == 1, result.output
    assert "divergence at turn 1: message 1 (user) content changed" in result.stdout


def _why_no_netns() -> str | None:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "a loopback-only network namespace and containment need Linux root"
    if shutil.which("unshare") is None or shutil.which("ip") is None or not shutil.which("git"):
        return "needs `unshare`, `ip` and git"
    return None


@needs_node
@pytest.mark.skipif(_why_no_netns() is not None, reason=str(_why_no_netns()))
def test_claude_code_replays_with_no_network_at_all() -> None:
    spec = REPO / "examples" / "claude-code-demo" / "notes.flow.yaml"
    inner = 'ip link set lo up && exec "$0" -m flowproof_cli run --quiet "$1"'
    done = run_command(
        ["unshare", "-n", "sh", "-c", inner, sys.executable, spec], env=DEMO_ENV, timeout=300
    )
    assert done.code == 0, done.output
    assert done.stdout.startswith("PASS: Claude Code reads the notes")


@needs_node
@pytest.mark.skipif(_why_no_netns() is not None, reason=str(_why_no_netns()))
def test_claude_code_replay_connects_nowhere_but_flowproof(tmp_path: Path) -> None:
    """Contained, the replay must certify `assert_no_egress`: no outbound connection at all,
    so `make demo` needs no network namespace around it (in a fresh git checkout elsewhere)."""
    demo = tmp_path / "claude-code-demo"
    shutil.copytree(REPO / "examples" / "claude-code-demo", demo)
    spec = demo / "notes.flow.yaml"
    text = spec.read_text().replace("timeout: 120\n", "  allow_egress: []\ntimeout: 120\n")
    spec.write_text(text + "  - assert_no_egress\n")
    for git in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "checkout"]):
        subprocess.run(
            ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", *git],
            cwd=demo,
            check=True,
        )
    result = run_cli("run", spec, env=DEMO_ENV)
    assert result.code == 0, result.output
    assert "egress containment: enforced (linux seccomp)" in result.stdout
