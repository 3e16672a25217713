"""errors.py is the one exception tree and the one mapping to exit codes."""

from __future__ import annotations

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
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    assert exited.value.code == 2
    assert capsys.readouterr().err == "error: no trace at x.trace.yaml\n"


def test_the_cli_maps_ctrl_c_to_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(**_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main.cli, "main", interrupt)
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    assert exited.value.code == ExitCode.INTERRUPTED == 130
    assert capsys.readouterr().err == "interrupted\n"
