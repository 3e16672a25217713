"""errors.py is the one exception tree and the one mapping to exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flowproof_cli import errors
from flowproof_cli.cli import main as cli_main
from flowproof_cli.egress import ContainmentError
from flowproof_cli.errors import ExitCode, FlowproofError, PortInUseError, Terminated


def test_every_flowproof_error_exits_2() -> None:
    for kind in (
        errors.SpecError,
        errors.TraceError,
        errors.ConfigError,
        PortInUseError,
        errors.AgentStartError,
        ContainmentError,
    ):
        assert issubclass(kind, FlowproofError), kind
        assert kind.exit_code == ExitCode.ERROR == 2


def test_the_signal_exit_codes_are_named_once() -> None:
    assert ExitCode.INTERRUPTED == 130
    assert ExitCode.TERMINATED == 143
    assert Terminated().code == 143
    assert not issubclass(Terminated, Exception)  # it passes every handler of flow errors


def test_a_taken_port_names_it() -> None:
    error = PortInUseError(8123)
    assert error.port == 8123
    assert str(error) == (
        "127.0.0.1:8123 is already in use. Fix: stop whatever listens there, or choose another port"
    )
    assert str(PortInUseError(8123, "proxy_port 8123 is taken")) == "proxy_port 8123 is taken"


def test_the_cli_maps_a_flowproof_error_to_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Red path: an error reaches the user as one line and exit 2, never a traceback."""

    def fail(**_: object) -> None:
        raise errors.TraceError("no trace at x.trace.yaml")

    monkeypatch.setattr(cli_main.cli, "main", fail)
    assert cli_main.exit_code() == 2
    assert capsys.readouterr().err == "error: no trace at x.trace.yaml\n"


def test_the_cli_maps_ctrl_c_to_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(**_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main.cli, "main", interrupt)
    assert cli_main.exit_code() == ExitCode.INTERRUPTED == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_the_fast_exit_flushes_output_and_runs_atexit_handlers() -> None:
    """`_exit` skips the interpreter's teardown, not what a normal exit promises: buffered
    output and atexit handlers (temporary folders, the process keeper) still happen."""
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('cleaned up'))\n"
        "from flowproof_cli.cli.main import _exit\n"
        "print('verdict', end=' ')\n"
        "sys.stderr.write('warning')\n"
        "_exit(3)\n"
        "print('never')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "verdict cleaned up\n", "warning")


@pytest.mark.parametrize(("raised", "code"), [(None, 0), (1, 1), (3, 3), ("bad", 1)])
def test_a_command_ending_with_sys_exit_keeps_its_code(
    monkeypatch: pytest.MonkeyPatch, raised: int | str | None, code: int
) -> None:
    def verdict(**_: object) -> None:
        sys.exit(raised)

    monkeypatch.setattr(cli_main.cli, "main", verdict)
    assert cli_main.exit_code() == code
