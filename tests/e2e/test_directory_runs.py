"""Directory runs end to end: one line per flow, the summary, JUnit XML, skips for flows
without a trace, error rows for bad specs, and `-j N` giving the same results as `-j 1`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flowproof_cli.verdict import Failure
from tests.conftest import REPO, clean_environ, run_cli
from tests.e2e.flows import traced_flow

pytestmark = pytest.mark.slow

JUNIT = Path(".flowproof") / "suite-junit.xml"


@pytest.fixture
def mixed(tmp_path: Path, recorded_trace: Path) -> Path:
    """Passing, diverging, untraced and env-gated flows, one of them in a subfolder."""
    root = tmp_path / "flows"
    traced_flow(root, recorded_trace, "a_pass")
    traced_flow(root, recorded_trace, "b_diverge", env={"AGENT_MODEL": "gpt-4o"})
    traced_flow(root, None, "c_untraced")
    traced_flow(root, recorded_trace, "d_gated", skip_unless_env=["FLOWPROOF_TEST_NEVER_SET"])
    traced_flow(root / "nested", recorded_trace, "e_pass")
    return root


def test_directory_run_prints_lines_summary_and_junit(mixed: Path) -> None:
    result = run_cli("run", mixed)
    assert result.code == 1, result.output
    lines = [line for line in result.stdout.splitlines() if not line.startswith(" ")]
    assert len(lines) == 6, result.stdout  # a line per flow (notes are indented), the summary
    assert re.fullmatch(r"PASS: a_pass flow \(\d+\.\ds\)", lines[0])
    assert re.fullmatch(
        r"FAIL: b_diverge flow \(\d+\.\ds\) - divergence at turn 1: model changed: "
        r"recorded gpt-4o-mini, replayed gpt-4o",
        lines[1],
    )
    untraced = mixed / "c_untraced.flow.yaml"
    assert f"SKIP: c_untraced flow - no trace; record it: flowproof record {untraced}" in lines
    assert "SKIP: d_gated flow - not set: FLOWPROOF_TEST_NEVER_SET (skip_unless_env)" in lines
    assert re.fullmatch(r"PASS: e_pass flow \(\d+\.\ds\)", lines[-2])
    assert lines[-1] == "2 passed, 1 failed, 2 skipped"

    root = ET.parse(mixed / JUNIT).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "5",
        "failures": "1",
        "errors": "0",
        "skipped": "2",
    }
    assert float(suite.get("time") or 0) > 0
    cases = {case.get("classname"): case for case in suite.iter("testcase")}
    assert list(cases) == [
        "a_pass.flow.yaml",
        "b_diverge.flow.yaml",
        "c_untraced.flow.yaml",
        "d_gated.flow.yaml",
        "nested/e_pass.flow.yaml",
    ]
    assert cases["a_pass.flow.yaml"].get("name") == "a_pass flow"
    failure = cases["b_diverge.flow.yaml"].find("failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith(
        "divergence at turn 1: model changed: recorded gpt-4o-mini, replayed gpt-4o"
    )
    skipped = cases["c_untraced.flow.yaml"].find("skipped")
    assert skipped is not None
    assert f"flowproof record {untraced}" in (skipped.get("message") or "")


def test_only_skips_is_a_pass(tmp_path: Path) -> None:
    traced_flow(tmp_path, None, "lonely")
    result = run_cli("run", tmp_path)
    assert result.code == 0, result.output
    assert result.stdout.splitlines()[-1] == "0 passed, 0 failed, 1 skipped"


def git(folder: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=True)
    return done.stdout


def test_run_records_never_show_in_git_status(tmp_path: Path, recorded_trace: Path) -> None:
    """`.flowproof/` holds a `.gitignore` of `*`: it never reaches `git status` (nor the git
    status a coding CLI sends its model), also where an older flowproof made it without one."""
    root = tmp_path / "repo"
    traced_flow(root / "specs", recorded_trace, "a_pass")
    traced_flow(root / "specs" / "sub", recorded_trace, "b_pass")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "flows")
    older = root / "specs" / "sub" / ".flowproof" / "runs"  # as an older flowproof left it
    older.mkdir(parents=True)
    (older / "notes.txt").write_text("left behind")
    assert run_cli("run", "specs", cwd=root).code == 0  # the run record, the JUnit XML
    assert run_cli("run", "specs/sub/b_pass.flow.yaml", cwd=root).code == 0
    assert (root / "specs" / ".flowproof" / "suite-junit.xml").is_file()
    for folder in (root / "specs", root / "specs" / "sub"):
        assert (folder / ".flowproof" / ".gitignore").read_text().endswith("\n*\n")
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


def test_bad_spec_is_an_error_row_and_the_others_still_run(mixed: Path) -> None:
    bad = mixed / "a_bad.flow.yaml"
    bad.write_text("name: bad\napp: agent\nagent:\n  command: x\nstpes: []\n")
    result = run_cli("run", mixed)
    assert result.code == 2, result.output
    assert f"ERROR: a_bad.flow.yaml (0.0s) - {bad}:5: unknown key `stpes`" in result.stdout
    assert "PASS: a_pass flow" in result.stdout and "PASS: e_pass flow" in result.stdout
    assert result.stdout.splitlines()[-1] == "2 passed, 1 failed, 2 skipped, 1 error(s)"
    suite = ET.parse(mixed / JUNIT).getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "1"
    error = next(c for c in suite.iter("testcase") if c.get("classname") == "a_bad.flow.yaml")
    assert f"{bad}:5: unknown key" in (error.find("error").get("message") or "")  # type: ignore[union-attr]


def _flows(stdout: str) -> list[tuple[object, ...]]:
    return [
        (
            flow["name"],
            flow["status"],
            [Failure.from_json(failure).text for failure in flow["failures"]],
            flow["skipped"],
            flow["error"],
        )
        for flow in json.loads(stdout)["flows"]
    ]


def _without_times(path: Path) -> str:
    return re.sub(r' time="[0-9.]+"', "", path.read_text())


def test_parallel_run_matches_serial_run(mixed: Path) -> None:
    (mixed / "a_bad.flow.yaml").write_text("name: bad\napp: agent\n")
    serial = run_cli("run", mixed, "--json")
    serial_junit = _without_times(mixed / JUNIT)
    parallel = run_cli("run", mixed, "--json", "-j", "2")
    assert (parallel.code, serial.code) == (2, 2), parallel.output
    assert _flows(parallel.stdout) == _flows(serial.stdout)
    assert [status for _, status, *_ in _flows(serial.stdout)] == [
        "error",
        "passed",
        "failed",
        "skipped",
        "skipped",
        "passed",
    ]
    assert _without_times(mixed / JUNIT) == serial_junit

    text_serial = run_cli("run", mixed, "-j", "1")
    text_parallel = run_cli("run", mixed, "-j", "3")
    assert re.sub(r"\(\d+\.\ds\)", "", text_parallel.stdout) == re.sub(
        r"\(\d+\.\ds\)", "", text_serial.stdout
    )


def test_parallel_flows_really_overlap(tmp_path: Path, recorded_trace: Path) -> None:
    # Each flow's before_each waits until both flows have started: only -j 2 gets past it.
    traced_flow(tmp_path, recorded_trace, "one")
    traced_flow(tmp_path, recorded_trace, "two")
    (tmp_path / "suite.yaml").write_text(
        "before_each: >-\n"
        '  touch "$FLOWPROOF_SPEC.started";\n'
        "  for i in $(seq 150); do\n"
        '  [ "$(ls *.started | wc -l)" -ge 2 ] && exit 0; sleep 0.1; done; exit 1\n'
    )
    result = run_cli("run", tmp_path, "-j", "2")
    assert result.code == 0, result.output
    assert result.stdout.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"


def _default_signals() -> None:
    """The child handles SIGINT and SIGTERM by default, however this test was started (a
    background job inherits SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 130)]
)
def test_a_signal_stops_parallel_flows_and_runs_after_each(
    tmp_path: Path, recorded_trace: Path, signum: int, code: int
) -> None:
    """Both flows of a -j 2 run share one process and one proxy: the signal stops both,
    runs both after_each hooks, exits with the signal's code and prints no traceback."""
    for name in ("one", "two"):
        traced_flow(tmp_path, recorded_trace, name, env={"AGENT_HANG_AFTER": "1"})
    (tmp_path / "suite.yaml").write_text(
        'before_each: touch "$FLOWPROOF_SPEC.started"\n'
        'after_each: echo "after $(basename "$FLOWPROOF_SPEC")" >> hooks.log\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "flowproof_cli", "run", str(tmp_path), "-j", "2"],
        env=clean_environ(),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("*.started"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3)  # both agents are now hanging after their first model call
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stdout + stderr
    assert "Traceback" not in stderr, stderr
    assert sorted((tmp_path / "hooks.log").read_text().splitlines()) == [
        "after one.flow.yaml",
        "after two.flow.yaml",
    ]
    assert "passed" not in stdout  # stopped: no summary
