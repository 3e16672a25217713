"""The model addon in plain mitmdump, no flowproof CLI: the real openai SDK agent of the
weather example (examples/agent-demo/weather_agent.py) is answered from its committed trace.

    mitmdump -s addons/model.py --mode reverse:http://127.0.0.1:9@127.0.0.1:PORT \
        --set connection_strategy=lazy --set flowproof_trace=weather.trace.yaml

The reverse target 127.0.0.1:9 is never dialled: every model call is answered by the addon.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_environ
from tests.e2e.sockets_and_pids import accepts, free_port

pytestmark = pytest.mark.slow

DEMO = REPO / "examples" / "agent-demo"
TRACE = DEMO / "weather.trace.yaml"
PROMPT = "What's the weather in Nairobi right now? Use both tools."  # as in weather.flow.yaml
MITMDUMP = Path(sys.executable).with_name("mitmdump")


def trace_option(trace: Path = TRACE) -> tuple[str, str]:
    """The option that points the model addon at `trace`."""
    return ("--set", f"flowproof_trace={trace}")


def mitmdump(
    port: int, home: Path, *scripts: str, options: Sequence[str] = ()
) -> subprocess.Popen[str]:
    """Stock mitmdump with the given scripts of addons/, a reverse proxy on `port`."""
    command = [str(MITMDUMP), "-q"]
    for script in scripts:
        command += ["-s", str(REPO / "addons" / script)]
    command += ["--mode", f"reverse:http://127.0.0.1:9@127.0.0.1:{port}"]
    command += ["--set", "connection_strategy=lazy", *options]
    return subprocess.Popen(
        command,
        env=clean_environ({"HOME": str(home)}),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@contextmanager
def stock_proxy(
    home: Path,
    *scripts: str,
    options: Sequence[str] = (),
    absent: Sequence[str] = ("Traceback",),
) -> Iterator[int]:
    """mitmdump with the scripts, listening on a fresh loopback port; once it is stopped, its
    output must hold none of `absent`."""
    port = free_port()
    proxy = mitmdump(port, home, *scripts, options=options)
    try:
        deadline = time.monotonic() + 30
        while not accepts(port):
            assert proxy.poll() is None, proxy.communicate()[0]
            assert time.monotonic() < deadline, "mitmdump never listened"
            time.sleep(0.1)
        yield port
    finally:
        proxy.terminate()
        output = proxy.communicate(timeout=10)[0]
    for words in absent:
        assert words not in output, output


def _agent(port: int, home: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    env = clean_environ(
        {
            "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "OPENAI_API_KEY": "offline-placeholder",
            "FLOWPROOF_PROMPT": prompt,
            "HOME": str(home),
        }
    )
    return subprocess.run(
        [sys.executable, "weather_agent.py"],
        cwd=DEMO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_stock_mitmdump_answers_the_weather_agent_from_its_trace(tmp_path: Path) -> None:
    """Two tool rounds: the get_time result differs every run, yet the trace's `match:`
    rules (the flow's `dates` preset, rebuilt by the addon) compare it as <date>."""
    before = TRACE.read_text()
    with stock_proxy(tmp_path, "model.py", options=trace_option()) as port:
        done = _agent(port, tmp_path, PROMPT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sunny" in done.stdout.lower()
    assert TRACE.read_text() == before  # replay never writes


def test_stock_mitmdump_refuses_a_prompt_the_trace_never_saw(tmp_path: Path) -> None:
    with stock_proxy(tmp_path, "model.py", options=trace_option()) as port:
        done = _agent(port, tmp_path, "What's the weather in Oslo?")
    assert done.returncode != 0
    assert "409" in done.stderr  # the SDK's ConflictError: x-should-retry stops its retries
    assert "flowproof: turn 1: " in done.stderr


def test_stock_mitmdump_with_a_missing_trace_exits_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.trace.yaml"
    proxy = mitmdump(free_port(), tmp_path, "model.py", options=trace_option(missing))
    output = proxy.communicate(timeout=60)[0]
    assert proxy.returncode == 1
    assert f"no trace at {missing}" in output
