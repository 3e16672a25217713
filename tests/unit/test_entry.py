"""A Ctrl-C while Python is still loading flowproof: `interrupted`, exit 130, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_environ, default_signals

PROBE = """
import os, signal, sys, time
from flowproof_cli.cli.entry import quiet_interrupts
case = sys.argv[1]
if case == "ignored":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
if case == "bare":  # what the window did before: nothing of flowproof's in place
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1)
else:
    with quiet_interrupts():
        if case != "calm":
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
print("default handler after:", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


def _probe(
    *args: str, program: str = PROBE, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        env=clean_environ(env),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=default_signals,  # the same however the suite was started
    )


def test_an_interrupt_while_loading_is_quiet() -> None:
    probe = _probe("interrupted")
    assert (probe.returncode, probe.stderr, probe.stdout) == (130, "interrupted\n", "")


def test_without_it_python_prints_its_traceback() -> None:
    """The red path: the window as it was."""
    probe = _probe("bare")
    assert probe.returncode == -signal.SIGINT  # Python ends itself by the signal
    assert "Traceback" in probe.stderr and "KeyboardInterrupt" in probe.stderr


@pytest.mark.parametrize(
    ("case", "restored"), [("calm", "True"), ("ignored", "False")], ids=["default", "ignored"]
)
def test_the_handler_before_is_kept_or_restored(case: str, restored: str) -> None:
    """Python's handler is back once loaded; an ignored SIGINT (a background job) was never
    replaced, so that Ctrl-C does nothing, as asked."""
    probe = _probe(case)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == f"default handler after: {restored}"


def test_the_loading_window_exits_with_the_interrupt_code_of_the_error_tree() -> None:
    """entry.py cannot import errors.py (that import is part of the window), so it keeps its
    own copy of the code; this pins the two together."""
    from flowproof_cli.cli.entry import INTERRUPTED_EXIT
    from flowproof_cli.errors import ExitCode

    assert INTERRUPTED_EXIT == ExitCode.INTERRUPTED == 130


# -- the other end: a Ctrl-C once the command has finished -------------------------------------

TAIL_PROBE = """
import atexit, os, signal, sys, time
from pathlib import Path
from flowproof_cli.cli import main
marker = Path(sys.argv[1])
atexit.register(marker.write_text, "the later clean-up ran")  # atexit runs last-in first
def interrupted_clean_up():
    os.kill(os.getpid(), signal.SIGINT)  # what a kill at a random moment of `run` hit
    time.sleep(0.5)
atexit.register(interrupted_clean_up)
main._exit(int(sys.argv[2]))
"""


@pytest.mark.parametrize("code", [0, 1])
def test_a_ctrl_c_during_the_exit_clean_up_neither_cuts_it_nor_prints_a_traceback(
    tmp_path: Path, code: int
) -> None:
    """The verdict is printed and its code decided; the atexit handlers (the keeper, the
    temporary folders) still run. Before, the interrupt landed in the keeper's wait and
    Python printed `Exception ignored in atexit callback` with its traceback."""
    marker = tmp_path / "marker"
    probe = _probe(str(marker), str(code), program=TAIL_PROBE)
    assert (probe.returncode, probe.stderr) == (code, "")
    assert marker.read_text() == "the later clean-up ran"


GAP_PROBE = """
from flowproof_cli.cli import main
def finished_then_interrupted():
    raise KeyboardInterrupt  # a Ctrl-C just after the command returned its code
main.exit_code = finished_then_interrupted
main.main()
"""


def test_a_ctrl_c_between_the_command_and_its_exit_clean_up_is_an_interrupt() -> None:
    """Before `_exit` ignores SIGINT: `interrupted`, exit 130, no traceback."""
    probe = _probe(program=GAP_PROBE)
    assert (probe.returncode, probe.stderr) == (130, "interrupted\n")


def test_an_interrupt_python_lost_before_the_run_still_ends_it_with_130() -> None:
    """A KeyboardInterrupt raised in a weakref callback (an import's module lock) is
    printed as ignored and lost; the handler remembered it, and the run's loop ends there
    without starting the run."""
    import asyncio

    from flowproof_cli.errors import EarlyInterrupt
    from flowproof_cli.runner.termination import stopping_once_on_ctrl_c

    started = []

    async def run() -> None:
        started.append(True)

    with pytest.raises(KeyboardInterrupt):
        EarlyInterrupt.handler(2, None)
    try:
        assert EarlyInterrupt.pressed
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(stopping_once_on_ctrl_c(run()))
        assert started == []
    finally:
        EarlyInterrupt.pressed = False
    asyncio.run(stopping_once_on_ctrl_c(run()))  # without one, the run runs
    assert started == [True]


# -- a Ctrl-C that Python loses once flowproof is loaded, under either entry point ------------

LOST_PROBE = """
import os, runpy, signal, sys, time, weakref
entry, spec = sys.argv[1], sys.argv[2]
lost = []
def lose_an_interrupt(event, args):
    # Once `run` loads its runner (before its event loop): a Ctrl-C raised inside a weakref
    # callback, where Python prints it as ignored and goes on, as under an import's lock.
    if event == "import" and args[0] == "flowproof_cli.runner.parallel" and not lost:
        lost.append(True)
        class Held: pass
        held = Held()
        ref = weakref.ref(held, lambda _: (os.kill(os.getpid(), signal.SIGINT), time.sleep(1)))
        del held
sys.addaudithook(lose_an_interrupt)
sys.argv = ["flowproof", "run", spec]
if entry == "module":
    runpy.run_module("flowproof_cli", run_name="__main__", alter_sys=True)
else:
    from flowproof_cli.cli.entry import main
    main()
"""


@pytest.mark.parametrize("entry", ["module", "console-script"])
def test_a_lost_interrupt_ends_the_run_with_130_under_either_entry_point(entry: str) -> None:
    """`python -m flowproof_cli` went on to run the flow and exit 0 (the random-kill probe
    caught it): only the console script remembered the interrupt."""
    spec = REPO / "examples" / "agent-demo" / "weather.flow.yaml"
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # its SDK
    probe = _probe(entry, str(spec), program=LOST_PROBE, env={"PATH": path})
    assert "Exception ignored" in probe.stderr  # the interrupt was lost as in the probe
    assert probe.returncode == 130, probe.stdout + probe.stderr
    assert "PASS" not in probe.stdout
