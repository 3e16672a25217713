"""`flowproof diff` and `flowproof show` as real processes: output, exit codes, bad files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flowproof_cli.trace import save
from tests.conftest import run_cli, run_command
from tests.unit.trace_builders import TIME, chat_trace

SPEC = """\
name: weather
app: agent
agent: {command: python agent.py}
steps:
  - prompt: go
  - assert_tool_call: get_weather where city equals Nairobi
"""


@pytest.fixture
def traces(tmp_path: Path) -> tuple[Path, Path]:
    """`weather.trace.yaml` and a re-record of it that asks for Paris."""
    old, new = tmp_path / "weather.trace.yaml", tmp_path / "weather.trace.candidate.yaml"
    save(old, chat_trace())
    save(new, chat_trace(calls=(("get_weather", '{"city": "Paris"}'), TIME), ids="b"))
    return old, new


def test_diff_of_equal_trajectories_exits_0(traces: tuple[Path, Path], tmp_path: Path) -> None:
    old, _ = traces
    again = tmp_path / "again.trace.yaml"
    save(again, chat_trace(ids="other"))  # only minted ids differ
    result = run_cli("diff", old, again)
    assert result.code == 0, result.output
    assert result.stdout == f"{old} -> {again}\ntrajectory unchanged\n"


def test_diff_of_different_trajectories_exits_1(traces: tuple[Path, Path]) -> None:
    result = run_cli("diff", *traces)
    assert result.code == 1, result.output
    assert "what the agent did differently:\n  get_weather.city: Nairobi -> Paris\n" in (
        result.stdout
    )


def test_diff_marks_what_the_spec_beside_old_asserts(traces: tuple[Path, Path]) -> None:
    old, new = traces
    old.with_name("weather.flow.yaml").write_text(SPEC)
    result = run_cli("diff", old, new)
    assert result.code == 1, result.output
    assert "  get_weather.city: Nairobi -> Paris (asserted)\n" in result.stdout


def test_diff_with_a_named_spec(traces: tuple[Path, Path], tmp_path: Path) -> None:
    spec = tmp_path / "elsewhere.flow.yaml"
    spec.write_text(SPEC)
    result = run_cli("diff", *traces, "--spec", spec)
    assert result.code == 1, result.output
    assert "(asserted)" in result.stdout


def test_a_broken_spec_beside_old_only_warns(traces: tuple[Path, Path]) -> None:
    old, new = traces
    old.with_name("weather.flow.yaml").write_text("name: [unclosed\n")
    result = run_cli("diff", old, new)
    assert result.code == 1, result.output
    assert "warning: asserted calls are not marked: " in result.stderr
    assert "weather.flow.yaml" in result.stderr
    assert "  get_weather.city: Nairobi -> Paris\n" in result.stdout


def test_a_named_spec_that_does_not_load_is_an_error(traces: tuple[Path, Path]) -> None:
    result = run_cli("diff", *traces, "--spec", "missing.flow.yaml")
    assert result.code == 2
    assert "missing.flow.yaml" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "error: no trace at {path}"),
        ("just: yaml\n", "error: {path}: not a flowproof trace"),
        ("turns: [unclosed\n", "error: {path}: not valid YAML"),
        ("flowproof_trace: 9\nturns: []\n", "error: {path}: trace format version 9"),
    ],
)
def test_unreadable_files_exit_2_naming_them(
    traces: tuple[Path, Path], tmp_path: Path, content: str | None, message: str
) -> None:
    bad = tmp_path / "bad.trace.yaml"
    if content is not None:
        bad.write_text(content)
    expected = message.format(path=bad)
    for args in (("diff", traces[0], bad), ("diff", bad, traces[0]), ("show", bad)):
        result = run_cli(*args)
        assert result.code == 2, (args, result.output)
        assert result.stderr.startswith(expected), (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_show_prints_the_timeline(traces: tuple[Path, Path]) -> None:
    result = run_cli("show", traces[0])
    assert result.code == 0, result.output
    assert result.stdout.splitlines()[:3] == [
        f"{traces[0]}: weather",
        "turn 1: openai-chat, model gpt-4o-mini, 2 tool(s) offered (get_weather, get_time)",
        "  system: You are a weather assistant.",
    ]
    assert result.stdout.endswith("  reply: It is sunny in Nairobi.\n")


def test_show_of_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("show", tmp_path)
    assert result.code == 2
    assert "is a directory" in result.stderr


@pytest.mark.parametrize("command", ["show", "diff"])
def test_neither_command_loads_the_proxy_engine(traces: tuple[Path, Path], command: str) -> None:
    args = [traces[0]] if command == "show" else list(traces)
    done = run_command([sys.executable, "-X", "importtime", "-m", "flowproof_cli", command, *args])
    assert done.code in (0, 1), done.stderr[-2000:]
    assert "flowproof_cli.evidence" in done.stderr  # the import log is there to read
    assert "mitmproxy" not in done.stderr
