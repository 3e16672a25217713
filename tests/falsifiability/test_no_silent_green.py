"""No exit 0 without a verdict for every flow asked for, whatever ends the run.

The rule is one check on the exit path (`cli.main.exit_code` holding every command that
runs flows to `Verdicts`), not a guard at each call site. This proves it by injection: a
real `flowproof run -j 2` of two flows (one with a matcher addon) runs under a trace
function that raises `SystemExit(0)` at the K-th call of flowproof's own code, for K spread
over the whole run, from the first call after the command's name is read to the last.
Whatever K hits (the command's loading, its options, planning, the proxy, a flow's
preparation, the event loop, printing, the run record), the run exits 0 only if every
verdict and the closing line (or the JSON document) are on stdout; otherwise it exits 2
saying so in one line. The exit path's own few functions are where the rule lives, and are
not injected into; the calls counted are the main thread's (user code and a flow's
preparation run in threads whose outcomes come back to it).

`test_exit_rule_*` state the same rule as a property of the exit path alone, in-process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowproof_cli.cli import main as cli_main
from flowproof_cli.errors import ConfigError, ExitCode, Terminated
from tests.conftest import REPO, CliResult, run_command

DEMO = REPO / "examples" / "match-demo"

#: Counts the calls of flowproof's own code in the main thread; raises SystemExit(0) at the
#: TARGET-th (0: never), and writes the count when the process exits.
_PROBE = """\
import atexit, os, sys
roots = tuple(os.path.join(sys.argv[3], part) + os.sep for part in ("flowproof_cli", "addons"))
exempt = {{{exempt}}}
target, out, count = int(sys.argv[1]), sys.argv[2], 0

def tracer(frame, event, arg):
    global count
    code = frame.f_code
    if code.co_filename.startswith(roots) and (
        code.co_filename, code.co_name) not in exempt:
        count += 1
        if count == target:
            sys.settrace(None)
            raise SystemExit(0)
    return None

atexit.register(lambda: open(out, "w").write(str(count)))
from flowproof_cli.cli.main import main
sys.argv = ["flowproof", *sys.argv[4:]]
sys.settrace(tracer)
main()
"""
#: The exit path's own functions: the rule itself (main.py).
_EXEMPT = (
    "main",
    "exit_code",
    "_command_code",
    "_exit",
    "_ended_by",
    "reset",
    "expect",
    "gave",
    "settled",
    "shortfall",
)


def _probe() -> str:
    main_py = str(REPO / "flowproof_cli" / "cli" / "main.py")
    return _PROBE.format(exempt=", ".join(repr((main_py, name)) for name in _EXEMPT))


@pytest.fixture(scope="module")
def two_flows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("injected") / "run"
    for name in ("a", "b"):
        shutil.copytree(DEMO, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _injected(root: Path, target: int, *args: str) -> tuple[CliResult, int]:
    count = root.parent / f"count-{target}-{len(args)}"
    command = [sys.executable, "-c", _probe(), str(target), str(count), str(REPO)]
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    result = run_command([*command, "run", "-j", "2", *args, str(root)], env=env, timeout=180)
    return result, int(count.read_text()) if count.exists() else -1


def _every_verdict(result: CliResult, as_json: bool) -> bool:
    if as_json:
        try:
            payload = json.loads(result.stdout)
        except ValueError:
            return False
        return len(payload["flows"]) == 2 and payload["exit_code"] == 0
    lines = result.stdout.splitlines()
    verdicts = [line for line in lines if line.startswith("PASS: ")]
    return len(verdicts) == 2 and lines[-1] == "2 passed, 0 failed, 0 skipped"


#: How many of the points below a run injects: a spread of them in `make test`, every one
#: in `make test-stress` (each point is one whole `run -j 2`, about 2 s).
POINTS = int(os.environ.get("FLOWPROOF_SILENT_GREEN_POINTS", "6"))


def _points(total: int) -> list[int]:
    """Dense where the command starts (loading, options, planning), then spread evenly to
    the last call of the run; POINTS of them, spread over the whole list."""
    early = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233]
    spread = [round(total * step / 12) for step in range(2, 13)]
    every = sorted({point for point in (*early, *spread, total - 1, total) if 0 < point <= total})
    if len(every) <= POINTS:
        return every
    return sorted({every[round(k * (len(every) - 1) / (POINTS - 1))] for k in range(POINTS)})


@pytest.mark.slow
@pytest.mark.stress
def test_no_exit_0_without_every_verdict_wherever_the_run_is_ended(two_flows: Path) -> None:
    clean, total = _injected(two_flows, 0)
    assert clean.code == 0 and _every_verdict(clean, as_json=False), clean.output[-3000:]
    assert total > 1000, total  # the whole run was counted
    outcomes: dict[int, int] = {}
    for number, point in enumerate(_points(total)):
        as_json = number % 2 == 1  # text and --json, alternately
        result, _ = _injected(two_flows, point, *(["--json"] if as_json else []))
        outcomes[point] = result.code
        if result.code == 0:
            assert _every_verdict(result, as_json), (point, result.output[-3000:])
            continue
        assert result.code == ExitCode.ERROR, (point, result.output[-3000:])
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("error: flowproof ended "), (point, result.stderr[-3000:])
        assert "by SystemExit(0) raised at " in last
    assert ExitCode.ERROR in outcomes.values(), outcomes  # the injection did end runs early


# -- the exit path alone, as a property -----------------------------------------------------------


def _ending(kind: str, value: object) -> Callable[[], object]:
    def end() -> object:
        if kind == "return":
            return value
        if kind == "exit":
            raise SystemExit(value)
        if kind == "terminated":
            raise Terminated
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind == "abort":
            raise click.exceptions.Abort
        if kind == "usage":
            raise click.UsageError("bad option")
        raise ConfigError("no upstream")

    return end


ENDINGS = st.tuples(
    st.sampled_from(
        ["return", "exit", "terminated", "interrupt", "abort", "usage", "flowproof_error"]
    ),
    st.one_of(st.none(), st.integers(-1, 200), st.just("text")),
)


@settings(max_examples=300, deadline=None)
@given(
    owes=st.booleans(),
    asked=st.one_of(st.none(), st.integers(0, 5)),
    printed=st.one_of(st.none(), st.integers(0, 5)),
    ending=ENDINGS,
)
def test_exit_rule_no_0_or_1_unless_every_verdict_was_printed(
    owes: bool, asked: int | None, printed: int | None, ending: tuple[str, object]
) -> None:
    """A command that owes verdicts (asked for `asked` flows, printed `printed`) and ends any
    way at all: 0 or 1 only when every verdict was printed; else 2 (with one line saying
    so), or the 130/143 of an interrupt."""

    def command(**_: object) -> object:
        if owes:
            cli_main.VERDICTS.expect(asked)
        if printed is not None:
            cli_main.VERDICTS.gave(printed)
        return _ending(*ending)()

    original = cli_main.cli.main
    cli_main.cli.main = command  # type: ignore[method-assign]
    try:
        code = cli_main.exit_code()
    finally:
        cli_main.cli.main = original  # type: ignore[method-assign]
    settled = not owes or (asked is not None and printed == asked)
    if code in (ExitCode.PASSED, ExitCode.FAILED):
        assert settled, (owes, asked, printed, ending, code)
    if not settled:
        assert code in (ExitCode.ERROR, ExitCode.INTERRUPTED, ExitCode.TERMINATED), code


def test_exit_rule_says_what_ended_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    def command(**_: object) -> None:
        cli_main.VERDICTS.expect(2)
        cli_main.VERDICTS.gave(1)
        sys.exit(0)

    original = cli_main.cli.main
    cli_main.cli.main = command  # type: ignore[method-assign]
    try:
        assert cli_main.exit_code() == ExitCode.ERROR
    finally:
        cli_main.cli.main = original  # type: ignore[method-assign]
    assert capsys.readouterr().err == (
        "error: flowproof ended having printed a verdict for 1 of the 2 flow(s) it was asked to "
        f"run, by SystemExit(0) raised at {__file__}:{command.__code__.co_firstlineno + 3}: "
        "that is no pass, so the exit code is 2. Fix: find what ended it there (code of yours "
        "that exits in flowproof's process, or a defect of flowproof's to report)\n"
    )


def test_every_command_that_runs_flows_is_held_to_the_rule() -> None:
    """`COMMANDS` marks them, and each is a FlowCommand: a new one cannot be left out."""
    context = click.Context(cli_main.cli)
    for name, entry in cli_main.COMMANDS.items():
        if name == "mcp-stdio":
            continue  # a stand-in for an MCP server, started by flowproof itself
        command = cli_main.cli.get_command(context, name)
        assert isinstance(command, cli_main.FlowCommand) == entry.runs_flows, name
    assert {name for name, e in cli_main.COMMANDS.items() if e.runs_flows} == {
        "run",
        "record",
        "chaos",
    }


@pytest.mark.parametrize("args", [["run", "--help"], ["record", "-h"], ["chaos", "--help"]])
def test_asking_a_flow_command_for_help_owes_nothing(
    monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["flowproof", *args])
    assert cli_main.exit_code() == ExitCode.PASSED


def test_a_run_that_forgets_its_summary_exits_2_not_0(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The forgotten print: a directory run of one flow (skipped: no trace yet) whose
    summary line is never printed returns 0 from the command, and exits 2."""
    from flowproof_cli.cli import run as run_module
    from tests.e2e.flows import write_flow

    write_flow(tmp_path)
    monkeypatch.setattr(sys, "argv", ["flowproof", "run", str(tmp_path)])
    assert cli_main.exit_code() == ExitCode.PASSED  # the twin: as it is, a verdict and 0
    monkeypatch.setattr(run_module, "print_summary", lambda results: None)
    assert cli_main.exit_code() == ExitCode.ERROR
    err = capsys.readouterr().err
    assert err.startswith(
        "error: flowproof ended having printed a verdict for 0 of the 1 flow(s) it was asked "
        f"to run, by SystemExit(0) raised at {run_module.__file__}:"
    ), err
    assert err.endswith(
        ": that is no pass, so the exit code is 2. Fix: find what ended it there "
        "(code of yours that exits in flowproof's process, or a defect of "
        "flowproof's to report)\n"
    )


def test_a_closed_output_is_named_as_the_cause_not_the_users_code(tmp_path: Path) -> None:
    """`flowproof run DIR | head -0`: the reader of stdout went away before the verdicts were
    printed. The exit stays 2 (nothing proves a verdict was read), and the line says what
    happened instead of blaming code that exits in flowproof's process."""
    import subprocess

    from tests.e2e.flows import write_flow

    write_flow(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "flowproof_cli", "run", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before flowproof writes
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == ExitCode.ERROR, err
    assert err == (
        "error: flowproof's standard output was closed (its reader, such as `head`, went "
        "away) before it printed a verdict for each of the 1 flow(s) it was asked to run: "
        "that is no pass, so the exit code is 2. Fix: let the whole output be read (write "
        "it to a file, or filter it with `grep`/`tail`, which read to the end)\n"
    ), err
