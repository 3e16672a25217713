"""The filesystem observation report on stderr: `--fs-report full|summary|off`, a summary when
long, and blocked egress never buried under it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from flowproof_cli.cli import options
from flowproof_cli.cli.main import cli
from flowproof_cli.cli.output import print_results
from flowproof_cli.egress.report import (
    FS_REPORT_MODES,
    SUMMARY_ABOVE,
    Blocked,
    Containment,
    EgressReport,
    FsEvent,
    printed_lines,
)
from flowproof_cli.verdict import FlowResult
from tests.conftest import run_cli

BLOCKED = "  blocked tcp 203.0.113.7:443 (connect) at 57ms"


def report(unlinks: int, *, blocked: bool = True, faults: int = 0) -> EgressReport:
    """A contained run: one note, a blocked call, one loopback destination, file deletions."""
    egress = EgressReport(Containment(True))
    egress.notes.append("egress containment: the agent ran without CAP_SYS_ADMIN")
    if blocked:
        egress.add_blocked(Blocked("203.0.113.7:443", "tcp", 57))
    egress.add_local("tcp 127.0.0.1:48717")
    for n in range(unlinks):
        egress.add_fs(FsEvent("unlinkat", f"/work/tmp/{n}.txt", 100 + n))
    egress.add_fs(FsEvent("openat", "[O_WRONLY|O_TRUNC] /work/db.sqlite", 99))
    egress.add_fs(FsEvent("renameat2", "/work/a -> /work/b", 98))
    for n in range(faults):
        egress.add_fs_fault(f"openat2 open_how unreadable ({n})")
    return egress


def fs_part(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("filesystem observation"))
    return lines[start:]


def test_a_short_report_is_printed_whole_in_summary_mode() -> None:
    lines = report(3).stderr_lines()
    assert len(fs_part(lines)) - 1 <= SUMMARY_ABOVE
    assert fs_part(printed_lines(lines, "summary")) == fs_part(lines)
    assert printed_lines(lines, "full") == lines


def test_a_long_report_is_summarized_with_counts_the_first_few_and_how_many_more() -> None:
    lines = report(260).stderr_lines()
    assert len(lines) == 1 + 2 + 2 + 1 + 262  # note, blocked, local, fs header and syscalls
    assert fs_part(printed_lines(lines, "summary")) == [
        "filesystem observation: observed (linux seccomp); 262 destructive syscall(s) "
        "(summary; --fs-report full lists every one)",
        "  per syscall: unlinkat 260, openat 1, renameat2 1",
        "  renameat2 /work/a -> /work/b at 98ms",
        "  openat [O_WRONLY|O_TRUNC] /work/db.sqlite at 99ms",
        "  unlinkat /work/tmp/0.txt at 100ms",
        "  unlinkat /work/tmp/1.txt at 101ms",
        "  unlinkat /work/tmp/2.txt at 102ms",
        "  ... 257 more",
    ]


def test_faults_are_summarized_too() -> None:
    summary = fs_part(printed_lines(report(20, faults=7).stderr_lines(), "summary"))
    assert summary[-6:] == [
        *(f"  fault: openat2 open_how unreadable ({n})" for n in range(5)),
        "  ... 2 more fault(s)",
    ]


def test_blocked_egress_comes_first_and_survives_every_mode() -> None:
    lines = report(260).stderr_lines()
    summary = printed_lines(lines, "summary")
    assert summary[:2] == ["egress report: 1 blocked call(s)", BLOCKED]
    assert summary[2] == "egress containment: the agent ran without CAP_SYS_ADMIN"
    off = printed_lines(lines, "off")
    assert off == [
        "egress report: 1 blocked call(s)",
        BLOCKED,
        "egress containment: the agent ran without CAP_SYS_ADMIN",
        "egress report: 1 loopback/unix destination(s) used (exempt; a local relay could "
        "forward off-host)",
        "  tcp 127.0.0.1:48717",
    ]
    full = printed_lines(lines, "full")
    assert full == lines and BLOCKED in full  # today's order, every line


def test_without_blocked_calls_nothing_is_invented() -> None:
    lines = report(1, blocked=False).stderr_lines()
    assert not any("blocked" in line for line in printed_lines(lines, "summary"))
    assert printed_lines([], "summary") == []


def test_the_command_line_spells_the_modes_of_the_report() -> None:
    assert options.FS_REPORT_MODES == FS_REPORT_MODES


# -- the option on the command line ---------------------------------------------------------------


@pytest.fixture
def contained_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`run` and `record` of a spec whose (stubbed) flow ran contained and deleted 260 files."""
    spec = tmp_path / "x.flow.yaml"
    spec.write_text("name: x\n")

    def execute(job: object) -> FlowResult:
        result = FlowResult("x", spec, "replay", tmp_path / "x.trace.yaml")
        result.egress_report = report(260).stderr_lines()
        return result

    # `run` and `record` import the runner when they run: patched where it lives.
    monkeypatch.setattr("flowproof_cli.runner.job.plan_jobs", lambda *a, **k: [object()])
    monkeypatch.setattr("flowproof_cli.runner.parallel.execute", execute)
    return spec


@pytest.mark.parametrize("command", ["run", "record"])
def test_fs_report_full_summary_off_on_the_cli(command: str, contained_result: Path) -> None:
    runner = CliRunner()
    outputs = {}
    for mode in (None, "full", "summary", "off"):
        args = [command, str(contained_result)] + (["--fs-report", mode] if mode else [])
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert result.stdout == "PASS: x\n"  # the report goes to stderr only
        outputs[mode] = result.stderr.splitlines()
    assert outputs[None] == outputs["summary"]  # the default
    assert len(outputs["full"]) == 268 and outputs["full"] == report(260).stderr_lines()
    assert outputs["summary"][:2] == ["egress report: 1 blocked call(s)", BLOCKED]
    assert "  ... 257 more" in outputs["summary"] and len(outputs["summary"]) == 13
    assert not any(line.startswith("filesystem observation") for line in outputs["off"])
    assert outputs["off"][:2] == ["egress report: 1 blocked call(s)", BLOCKED]


def test_print_results_threads_the_mode(capsys: pytest.CaptureFixture[str]) -> None:
    result = FlowResult("x", Path("x.flow.yaml"), "replay", Path("x.trace.yaml"))
    result.egress_report = report(260).stderr_lines()
    print_results([result], as_json=False, summary=False, fs_report="off")
    assert "filesystem observation" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "record"])
def test_an_unknown_fs_report_value_is_a_usage_error(command: str, tmp_path: Path) -> None:
    spec = tmp_path / "x.flow.yaml"
    spec.write_text("name: x\n")
    result = run_cli(command, spec, "--fs-report", "loud")
    assert result.code == 2
    assert (
        "Error: Invalid value for '--fs-report': 'loud' is not one of 'full', 'summary', 'off'."
        in result.stderr
    )
    assert result.stdout == ""


def test_a_directory_run_prints_each_flow_under_the_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = FlowResult("x", tmp_path / "x.flow.yaml", "replay", tmp_path / "x.trace.yaml")
    result.egress_report = report(260).stderr_lines()

    def run_jobs(planned: object, jobs: int, on_result: object = None) -> list[FlowResult]:
        assert callable(on_result)
        on_result(result)  # as each flow (of any worker) finishes
        return [result]

    spec = tmp_path / "x.flow.yaml"
    monkeypatch.setattr("flowproof_cli.runner.discovery.discover_specs", lambda target: [spec])
    monkeypatch.setattr("flowproof_cli.runner.job.plan_jobs", lambda *a, **k: [object()])
    monkeypatch.setattr("flowproof_cli.runner.parallel.run_jobs", run_jobs)
    monkeypatch.setattr("flowproof_cli.runner.junit.write_junit", lambda *a, **k: None)
    off = CliRunner().invoke(cli, ["run", str(tmp_path), "-j", "2", "--fs-report", "off"])
    assert off.exit_code == 0, off.output
    assert off.stderr.splitlines()[:2] == ["egress report: 1 blocked call(s)", BLOCKED]
    assert "filesystem observation" not in off.stderr
    assert off.stdout.splitlines()[-1] == "1 passed, 0 failed, 0 skipped"
