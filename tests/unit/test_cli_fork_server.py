"""The fork server behind `run_cli` (tests/cli_fork_server.py): a forked run ends, prints
and sees what a fresh `python -m` process would, and anything it cannot serve the same way
goes to a real process."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests import cli_fork_server
from tests.conftest import REPO, CliResult, clean_environ, run_cli, run_command

PROBE = "tests.unit.fork_probe"


def forked(
    *args: str, env: dict[str, str] | None = None, cwd: Path = REPO, timeout: float = 60
) -> cli_fork_server.Served:
    served = cli_fork_server.request(
        list(args),
        clean_environ(env),
        cwd,
        timeout,
        server_env=clean_environ(),
        server_cwd=REPO,
        module=PROBE,
    )
    assert served is not None, "the fork server did not serve the request"
    return served


def fresh(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> CliResult:
    return run_command([sys.executable, "-m", PROBE, *args], env=env, cwd=cwd)


def state(result: Any) -> dict[str, Any]:
    assert result.code == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_a_forked_run_sees_what_a_fresh_process_sees(tmp_path: Path) -> None:
    env = {"FORK_PROBE": "a value", "HOME": str(tmp_path), "FORK_PROBE_CALLER": str(os.getpid())}
    mine, theirs = (
        state(forked("state", env=env, cwd=tmp_path)),
        state(fresh("state", env=env, cwd=tmp_path)),
    )
    for key in ("argv", "path0", "cwd", "fds", "signals", "stdout", "stderr", "name", "pgid"):
        assert mine[key] == theirs[key], key
    assert mine["environ"] == theirs["environ"] == clean_environ(env)
    assert mine["fds"] == [0, 1, 2, 3]  # 3: the listing of /proc/self/fd itself
    assert mine["pgid"] is True  # the caller's process group, as subprocess.run leaves it


def test_exit_code_and_output_come_back() -> None:
    served = forked("exit-3")
    assert served.code == 3
    assert served.stdout == ""
    assert served.stderr == "to stderr\nand a second line\n"  # universal newlines, as text=True
    assert fresh("exit-3") == CliResult(served.code, served.stdout, served.stderr)


def test_the_cli_itself_answers_the_same_forked_and_fresh(tmp_path: Path) -> None:
    for args in (("--version",), ("check", str(tmp_path / "missing")), ("schema",)):
        served = run_cli(*args)
        command = [sys.executable, "-m", "flowproof_cli", *args]
        assert served == run_command(command), args


def test_a_signal_that_kills_the_child_is_a_negative_code() -> None:
    assert forked(f"signal-{int(signal.SIGTERM)}").code == -signal.SIGTERM
    assert fresh(f"signal-{int(signal.SIGTERM)}").code == -signal.SIGTERM


def test_an_uncaught_interrupt_ends_by_sigint_as_python_does() -> None:
    served = forked("interrupt")
    assert served.code == fresh("interrupt").code == -signal.SIGINT
    assert "KeyboardInterrupt" in served.stderr


def test_a_timeout_kills_the_child() -> None:
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        forked("sleep", timeout=1.5)
    assert time.monotonic() - started < 30
    pid = int(bytes(raised.value.stdout or b"").decode().split()[0])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), "the timed-out child still runs"


def test_a_different_startup_variable_goes_to_a_real_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert forked("exit-0").code == 0  # the server runs
    for name in ("PYTHONHASHSEED", "PYTHONWARNINGS", "LC_ALL", "TZ", "SSLKEYLOGFILE"):
        served = cli_fork_server.request(
            [],
            clean_environ({name: "1"}),
            REPO,
            60,
            server_env=clean_environ(),
            server_cwd=REPO,
            module=PROBE,
        )
        assert served is None, name
    assert run_cli("--version", env={"PYTHONHASHSEED": "1"}).code == 0  # through subprocess


def test_startup_difference_names_the_variable() -> None:
    base = {"PATH": "/bin", "LANG": "C.UTF-8"}
    assert cli_fork_server.startup_difference(base, {**base, "HOME": "/x"}, frozenset()) is None
    assert cli_fork_server.startup_difference(base, {"PATH": "/bin"}, frozenset()) == "LANG"
    read = frozenset({"RUAMEL_DEBUG", "HOME"})
    assert (
        cli_fork_server.startup_difference(base, {**base, "RUAMEL_DEBUG": "1"}, read)
        == "RUAMEL_DEBUG"
    )
    assert cli_fork_server.startup_difference(base, {**base, "HOME": "/x"}, read) is None


def test_the_switch_turns_forking_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cli_fork_server.SWITCH, "0")
    served = cli_fork_server.request(
        [], clean_environ(), REPO, 60, server_env=clean_environ(), server_cwd=REPO, module=PROBE
    )
    assert served is None
    assert run_cli("--version").code == 0


def test_runs_side_by_side_each_get_their_own_result() -> None:
    with ThreadPoolExecutor(4) as pool:
        codes = list(pool.map(lambda code: forked(f"exit-{code}").code, range(8)))
    assert codes == list(range(8))


def test_every_preloaded_module_exists() -> None:
    """The server skips a module that is gone (a rename elsewhere must not break it), but a
    forked run would then import it again itself: a rename updates PRELOAD too."""
    gone = [name for name in cli_fork_server.PRELOAD if importlib.util.find_spec(name) is None]
    assert gone == []
