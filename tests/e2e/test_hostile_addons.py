"""Matcher addons that exit, interrupt, sleep or spin, through the real CLI, beside a flow
that is fine: the bad one fails naming the addon, the hook and what it did; the other gets
its verdict; the run ends with a verdict for both (never 0 with nothing said), and Ctrl-C,
SIGTERM and `--timeout` still end it.

The flows are two copies of examples/match-demo (its committed trace replays anywhere);
the first one's matcher script is changed, as in the report this reproduces.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flowproof_cli.verdict import Failure
from tests.conftest import REPO, CliResult, run_cli, start_cli

pytestmark = pytest.mark.slow

DEMO = REPO / "examples" / "match-demo"
NAME = "A coding-CLI-shaped agent replays on any machine, any day"
SCRIPT = "strip_session.py"
HOOK_NAME = "flowproof_normalize"
HOOK_LINE = 22  # the line the changes below put into flowproof_normalize
IMPORT_LINE = 15  # the line they put at the script's top level

#: What user code does, as a statement of Python.
EXITS = {
    "sys.exit(0)": "SystemExit: 0",
    "sys.exit(3)": "SystemExit: 3",
    "raise KeyboardInterrupt": "KeyboardInterrupt",
    "raise GeneratorExit": "GeneratorExit",
}
SLEEPS = "time.sleep(600)"
SPINS = "while True: pass"


def _demo(folder: Path) -> Path:
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder / "matchers" / SCRIPT


def _in_hook(script: Path, statement: str) -> None:
    """`statement` as the first line of flowproof_normalize's body."""
    text = script.read_text()
    doc = '        """Called with a deep copy of each canonical request; returns the request to match."""\n'
    assert doc in text
    script.write_text(text.replace(doc, f"{doc}        import sys, time\n        {statement}\n"))
    assert script.read_text().splitlines()[HOOK_LINE - 1].strip().endswith(statement)


def _at_import(script: Path, statement: str) -> None:
    text = script.read_text()
    script.write_text(text.replace("import json\n", f"import json, sys, time\n{statement}\n", 1))
    assert script.read_text().splitlines()[IMPORT_LINE - 1] == statement


def _with_plain_hook(script: Path, hook: str, statement: str) -> None:
    """A second addon object in the script, whose mitmproxy `hook` does `statement`."""
    args = "self" if hook == "running" else "self, flow"
    plain = f"\n\nclass Plain:\n    def {hook}({args}):\n        import sys, time\n        {statement}\n"
    text = script.read_text().replace("addons = [StripSession()]\n", "")
    script.write_text(f"{text}{plain}\n\naddons = [StripSession(), Plain()]\n")


def _two_flows(tmp_path: Path, change: str, where: str) -> Path:
    """`tmp_path/run`: `a` with the changed script (first in the run's order), `b` as is."""
    root = tmp_path / "run"
    script = _demo(root / "a")
    _demo(root / "b")
    if where == "import":
        _at_import(script, change)
    elif where == "flowproof_normalize":
        _in_hook(script, change)
    else:
        _with_plain_hook(script, where, change)
    return root


def _env(**extra: str) -> dict[str, str]:
    """The demo agent is `python session_agent.py`: this venv's python first on PATH."""
    return {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **extra}


def _json(result: CliResult) -> dict[str, dict[str, object]]:
    try:
        payload = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"no JSON document (exit {result.code}):\n{result.output[-3000:]}")
    return {Path(str(flow["spec_path"])).parent.name: flow for flow in payload["flows"]}


def _said(flow: dict[str, object]) -> str:
    failures = flow["failures"]
    assert isinstance(failures, list)
    texts = [Failure.from_json(failure).text for failure in failures]
    return "\n".join([*texts, str(flow["error"] or "")])


# -- an exit or an interrupt raised by user code ----------------------------------------------


@pytest.mark.parametrize("change", list(EXITS))
@pytest.mark.parametrize("where", ["import", "flowproof_normalize", "request", "running"])
def test_an_exit_in_an_addon_fails_its_flow_and_the_run_goes_on(
    tmp_path: Path, change: str, where: str
) -> None:
    """`-j 2 --json`: a JSON document with both flows; the addon's flow is an error (its
    script does not import: exit 2) or a failure (a hook: exit 1) naming what it raised."""
    root = _two_flows(tmp_path, change, where)
    result = run_cli("run", "-j", "2", "--json", root, env=_env())
    flows = _json(result)
    assert set(flows) == {"a", "b"}, result.output[-3000:]
    assert flows["b"]["status"] == "passed", _said(flows["b"])
    said, raised = _said(flows["a"]), EXITS[change]
    if where == "import":
        assert result.code == 2, result.output[-3000:]
        assert flows["a"]["status"] == "error"
        assert (
            f"{root / 'a' / 'matchers' / SCRIPT}:{IMPORT_LINE}: the matcher addon script " in said
        )
        assert f"(spec) does not import: {raised}. Fix: a matcher script must not exit" in said
    else:
        assert result.code == 1, result.output[-3000:]
        assert flows["a"]["status"] == "failed"
        addon = "StripSession" if where == HOOK_NAME else "Plain"
        assert f"the matcher addon {addon} raised {raised} in {where} ({SCRIPT}:" in said
    assert "Traceback" not in result.stderr  # (the agent's own output, in the JSON, has one)


#: Calls that end or replace the process, as user code makes them (`os` imported or not).
PROCESS_ENDS = {
    "__import__('os')._exit(0)": "ProcessEnd: os._exit(0) was refused",
    "__import__('os').execv('/bin/true', ['true'])": (
        "ProcessEnd: os.execv('/bin/true', ['true']) was refused"
    ),
}


@pytest.mark.parametrize("change", list(PROCESS_ENDS))
def test_os_exit_or_exec_in_an_addon_fails_its_flow_not_the_run(
    tmp_path: Path, change: str
) -> None:
    """An outside probe's find: `os._exit(0)` in a hook ended `run DIR` with exit 0 and no
    output (nothing is raised, so nothing was caught); an `os.execv` of `true` the same.
    Now the call is refused in the script's thread and fails its flow like a SystemExit."""
    root = _two_flows(tmp_path, change, HOOK_NAME)
    result = run_cli("run", root, env=_env())
    assert result.code == 1, result.output[-3000:]
    assert (
        f"flowproof: the matcher addon StripSession raised {PROCESS_ENDS[change]}" in result.stdout
    ), result.output[-3000:]
    assert f"PASS: {NAME} " in result.stdout
    assert result.stdout.rstrip().endswith("1 passed, 1 failed, 0 skipped")
    assert "Traceback" not in result.output


def test_sys_exit_0_in_the_hook_is_no_silent_pass(tmp_path: Path) -> None:
    """The report as filed: `flowproof run DIR` ended 0 with no output at all. Now the
    verdict of each flow and the summary, exit 1."""
    root = _two_flows(tmp_path, "sys.exit(0)", HOOK_NAME)
    result = run_cli("run", root, env=_env())
    assert result.code == 1, result.output[-3000:]
    assert (
        f"FAIL: {NAME} " in result.stdout
        and f"flowproof: the matcher addon StripSession raised SystemExit: 0 in "
        f"flowproof_normalize ({SCRIPT}:{HOOK_LINE})"
        in result.stdout
    ), result.output[-3000:]
    assert f"PASS: {NAME} " in result.stdout
    assert result.stdout.rstrip().endswith("1 passed, 1 failed, 0 skipped")
    assert "Traceback" not in result.output


def test_sys_exit_0_at_import_of_a_single_spec_is_exit_2(tmp_path: Path) -> None:
    root = _two_flows(tmp_path, "sys.exit(0)", "import")
    result = run_cli("run", root / "a" / "session.flow.yaml", env=_env())
    assert result.code == 2, result.output[-3000:]
    assert f"ERROR: {NAME} - " not in result.stdout  # a single spec: the error line
    assert f"{SCRIPT}:{IMPORT_LINE}: the matcher addon script (spec) does not import: " in (
        result.stderr
    )
    assert "Traceback" not in result.output


# -- an addon that sleeps or spins --------------------------------------------------------------


@pytest.mark.parametrize("change", [SLEEPS, SPINS], ids=["sleeps", "spins"])
@pytest.mark.parametrize("where", [HOOK_NAME, "request", "import"])
def test_an_addon_past_its_budget_fails_its_flow_naming_it(
    tmp_path: Path, change: str, where: str
) -> None:
    root = _two_flows(tmp_path, change, where)
    started = time.monotonic()
    result = run_cli("run", "-j", "2", "--json", root, env=_env(FLOWPROOF_ADDON_BUDGET="2"))
    assert time.monotonic() - started < 90  # a bound on a hang, not a timing assertion
    flows = _json(result)
    assert flows["b"]["status"] == "passed", _said(flows["b"])
    said = _said(flows["a"])
    if where == "import":
        assert result.code == 2
        assert (
            f"{SCRIPT}:{IMPORT_LINE}: the matcher addon script (spec) did not import within "
            "its budget of 2 s. Fix: make its import return sooner, or set "
            "FLOWPROOF_ADDON_BUDGET to the seconds it needs" in said
        ), said
    else:
        assert result.code == 1
        addon = "StripSession" if where == HOOK_NAME else "Plain"
        assert (
            f"the matcher addon {addon} did not return from {where} within its budget of 2 s "
            f"(still at {SCRIPT}:" in said
        ), said


class _Watched:
    """A running CLI whose stdout lines are read as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, within_s: float) -> None:
        deadline = time.monotonic() + within_s
        while not any(text in line for line in self.seen):
            left = deadline - time.monotonic()
            if left <= 0 or (self.process.poll() is not None and self.lines.empty()):
                self.process.kill()
                pytest.fail(f"no {text!r} on stdout within {within_s} s: {self.seen}")
            try:
                self.seen.append(self.lines.get(timeout=min(left, 1.0)))
            except queue.Empty:
                continue


def _agents_under(folder: Path) -> list[int]:
    """Processes (the agents) still working in a folder below `folder`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == folder or folder in cwd.parents:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("change", [SLEEPS, SPINS], ids=["sleeps", "spins"])
@pytest.mark.parametrize(
    ("signum", "code", "notice"),
    [
        (signal.SIGTERM, 143, "flowproof: SIGTERM received: stopping the agent and the proxy"),
        (signal.SIGINT, 130, "interrupted"),
    ],
    ids=["SIGTERM", "SIGINT"],
)
def test_a_stuck_addon_holds_neither_the_other_flow_nor_a_signal(
    tmp_path: Path, change: str, signum: int, code: int, notice: str
) -> None:
    """`-j 2`, the budget far off: while the addon's hook sleeps (or spins) the other flow
    gets its verdict, and the signal ends the run at once, its agents gone."""
    root = _two_flows(tmp_path, change, HOOK_NAME)
    (root / "a").rename(root / "z")  # the stuck flow last: the other's verdict prints first
    process = start_cli("run", "-j", "2", root, env=_env(FLOWPROOF_ADDON_BUDGET="600"))
    watched = _Watched(process)
    watched.wait_for(f"PASS: {NAME}", within_s=120)
    time.sleep(1)  # the stuck flow's agent is waiting on its first answer by now
    process.send_signal(signum)
    try:
        process.wait(timeout=60)  # a bound on a hang, not a timing assertion
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("the signal did not end the run")
    assert process.stderr is not None
    stderr = process.stderr.read()
    assert process.returncode == code, stderr
    assert notice in stderr
    assert "Traceback" not in stderr
    deadline = time.monotonic() + 10
    while _agents_under(root) and time.monotonic() < deadline:
        time.sleep(0.2)  # the keeper's sweep runs as flowproof exits
    assert _agents_under(root) == []


@pytest.mark.parametrize("change", [SLEEPS, SPINS], ids=["sleeps", "spins"])
def test_timeout_fires_whatever_the_addon_does(tmp_path: Path, change: str) -> None:
    """A budget far longer than `--timeout`: the flow's timeout bounds the addon's calls, so
    the stuck flow ends near its timeout, naming the addon, and the other one passes."""
    root = _two_flows(tmp_path, change, HOOK_NAME)
    started = time.monotonic()
    result = run_cli(
        "run", "-j", "2", "--timeout", "8", "--json", root, env=_env(FLOWPROOF_ADDON_BUDGET="600")
    )
    assert time.monotonic() - started < 90  # a bound on a hang, not a timing assertion
    flows = _json(result)
    assert result.code == 1, result.output[-3000:]
    assert flows["b"]["status"] == "passed", _said(flows["b"])
    assert (
        "the matcher addon StripSession did not return from flowproof_normalize within its "
        "budget of 8 s" in _said(flows["a"])
    )
    assert "Fix: make flowproof_normalize return sooner, or give the flow a longer timeout" in (
        _said(flows["a"])
    )
