"""`flowproof inspect` and `flowproof run --inspect` through the real CLI and a real mitmweb,
and mitmweb's page rendered by a real headless Chromium.

Everything listens on 127.0.0.1. Chromium phones home, so it runs inside `unshare -n` with only
loopback up, and the `flowproof inspect` it looks at runs inside the same namespace (a new
namespace has a loopback of its own).
"""

from __future__ import annotations

import http.cookiejar
import json
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import REPO, run_cli, run_command, start_cli
from tests.unit.test_conversation_view import MCP_TRACE_COMMENTS

_WAIT_S = 90.0


class Output:
    """A pipe read line by line in a thread, so a wait for a line never blocks on the pipe."""

    def __init__(self, stream: IO[str]):
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def until(self, needle: str) -> str:
        """The next line holding `needle`; fails at the end of the output or after 90 s."""
        deadline = time.monotonic() + _WAIT_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if needle in line:
                return line
        raise AssertionError(f"no {needle!r} in the output: {self.text()}")

    def text(self) -> str:
        """Everything read so far, and the rest once the pipe has closed."""
        self._thread.join(timeout=1)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.lines.append(line)
        return "".join(self.lines)


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str
    stdout: Output
    stderr: Output

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)


@contextmanager
def serving(*args: str | Path, stream: str = "stdout") -> Iterator[Served]:
    """`flowproof ARGS` started, its URL read from `stream`; killed if the test did not stop it."""
    process = start_cli(*args)
    assert process.stdout is not None and process.stderr is not None
    outputs = {"stdout": Output(process.stdout), "stderr": Output(process.stderr)}
    try:
        line = outputs[stream].until("?token=")
        url = next(word for word in line.split() if word.startswith("http://"))
        yield Served(process, url, outputs["stdout"], outputs["stderr"])
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _session(url: str) -> urllib.request.OpenerDirector:
    """An HTTP client holding mitmweb's auth cookie (set by visiting the tokened URL)."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    opener.open(url, timeout=10).read()
    return opener


def _flows(served: Served, count: int) -> list[dict[str, Any]]:
    """The view's flows once `count` have arrived (they are fed in as the child starts)."""
    opener = _session(served.url)
    deadline = time.monotonic() + _WAIT_S
    while True:
        base = f"http://127.0.0.1:{served.port}"
        flows: list[dict[str, Any]] = json.loads(opener.open(f"{base}/flows", timeout=10).read())
        if len(flows) >= count or time.monotonic() > deadline:
            return flows
        time.sleep(0.1)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _stopped(served: Served, sig: signal.Signals) -> tuple[int, str]:
    """Its exit code and all of its stderr, once `sig` has stopped it."""
    served.process.send_signal(sig)
    code = served.process.wait(timeout=30)
    return code, served.stderr.text()


# -- flowproof inspect ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_inspect_serves_the_trace_as_commented_flows_until_stopped(sig: signal.Signals) -> None:
    with serving("inspect", "specs/mcp.trace.yaml") as served:
        assert served.url.startswith("http://127.0.0.1:")
        flows = _flows(served, 7)
        assert [flow["comment"] for flow in flows] == MCP_TRACE_COMMENTS
        base = f"http://127.0.0.1:{served.port}"
        shown = json.loads(
            _session(served.url)
            .open(f"{base}/flows/{flows[5]['id']}/request/content/auto.json", timeout=10)
            .read()
        )
        assert shown["view_name"] == "flowproof conversation"
        assert shown["text"].endswith('tools/call write_note {"name": "a.txt", "text": "hello"}')
        code, stderr = _stopped(served, sig)
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert not _listening(served.port)  # mitmweb went with it


@pytest.mark.slow
def test_inspect_refuses_a_visit_without_the_token() -> None:
    with serving("inspect", "specs/chat.trace.yaml") as served:
        bare = f"http://127.0.0.1:{served.port}/flows"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bare, timeout=10)
        assert refused.value.code == 403
        wrong = f"http://127.0.0.1:{served.port}/?token=not-the-token"
        with pytest.raises(urllib.error.HTTPError) as wrong_token:
            urllib.request.urlopen(wrong, timeout=10)
        assert wrong_token.value.code == 403
        assert _stopped(served, signal.SIGTERM)[0] == 0
        assert served.stdout.text().count("?token=") == 1  # printed once


@pytest.mark.slow
def test_a_killed_inspect_takes_mitmweb_with_it() -> None:
    """SIGKILL leaves flowproof no cleanup: mitmweb stops on the end of its stdin."""
    with serving("inspect", "specs/chat.trace.yaml") as served:
        _flows(served, 2)
        served.process.kill()
        served.process.wait()
        deadline = time.monotonic() + _WAIT_S
        while _listening(served.port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _listening(served.port)


def test_inspect_of_a_missing_trace_is_exit_2_with_the_fix(tmp_path: Path) -> None:
    result = run_cli("inspect", tmp_path / "nope.trace.yaml")
    assert result.code == 2
    assert (
        f"error: {tmp_path / 'nope.trace.yaml'}: no such trace. Fix: give a recorded "
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_inspect_of_a_spec_without_its_trace_says_how_to_record_it(tmp_path: Path) -> None:
    spec = tmp_path / "x.flow.yaml"
    spec.write_text("name: x\n")
    result = run_cli("inspect", spec)
    assert result.code == 2
    trace = tmp_path / "x.trace.yaml"
    assert f"error: no trace at {trace}; record it first: flowproof record {spec}" in result.stderr


def test_inspect_of_a_broken_trace_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.trace.yaml"
    bad.write_text("flowproof_trace: 1\nturns: [\n")
    result = run_cli("inspect", bad)
    assert result.code == 2
    assert f"error: {bad}: not valid YAML" in result.stderr
    assert "Traceback" not in result.stderr


def test_inspect_on_a_busy_port_is_exit_2_naming_it() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli("inspect", "specs/chat.trace.yaml", "--port", str(port))
    assert result.code == 2
    assert f"error: the inspect port 127.0.0.1:{port} is already in use. Fix: " in result.stderr


# -- flowproof run --inspect ---------------------------------------------------------------------


def _spec(tmp_path: Path, city: str) -> Path:
    """specs/chat.flow.yaml with its recorded trace, asking about `city` (Kyoto: as recorded)."""
    text = (REPO / "specs/chat.flow.yaml").read_text()
    agent = REPO / "examples/agent-demo/weather_agent.py"
    text = text.replace(
        "python ../examples/agent-demo/weather_agent.py", f"{sys.executable} {agent}"
    )
    spec = tmp_path / "chat.flow.yaml"
    spec.write_text(text.replace("in Kyoto right now", f"in {city} right now"))
    shutil.copy(REPO / "specs/chat.trace.yaml", tmp_path / "chat.trace.yaml")
    return spec


@pytest.mark.slow
def test_run_inspect_serves_a_passing_run_live_and_after_it(tmp_path: Path) -> None:
    with serving("run", _spec(tmp_path, "Kyoto"), "--inspect", stream="stderr") as served:
        assert "?token=" not in served.stderr.until("still serving")  # printed once
        flows = _flows(served, 2)
        assert [flow["comment"] for flow in flows] == [
            "turn 1, openai-chat, tools called: get_weather, get_time; "
            "flowproof: answered from the trace",
            "turn 2, openai-chat, no tool called; flowproof: answered from the trace",
        ]
        assert [flow["marked"] for flow in flows] == ["", ""]
        code, stderr = _stopped(served, signal.SIGINT)
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert not _listening(served.port)


@pytest.mark.slow
def test_run_inspect_marks_the_divergent_turn_and_keeps_the_verdict(tmp_path: Path) -> None:
    with serving("run", _spec(tmp_path, "Paris"), "--inspect", stream="stderr") as served:
        served.stderr.until("still serving")
        (flow,) = _flows(served, 1)
        assert flow["marked"] == "\u26a0"  # the boundary's `:warning:`, as mitmweb shows it
        assert flow["comment"] == (
            "turn 1, openai-chat, no tool called; flowproof: turn 1: message 1 (user) content changed"
        )
        assert flow["response"]["status_code"] == 409
        code, stderr = _stopped(served, signal.SIGTERM)
    assert code == 1, stderr  # the run's verdict, not the stop
    assert "Traceback" not in stderr


# -- a real browser ------------------------------------------------------------------------------

#: Run inside the namespace: start `flowproof inspect`, find a model flow's id, let Chromium
#: render the page showing that flow's request, stop inspect; report as JSON on stdout.
_DRIVER = r"""
import http.cookiejar, json, os, signal, subprocess, sys, urllib.request
from urllib.parse import urlsplit

trace, profile = sys.argv[1], sys.argv[2]
inspect = subprocess.Popen([sys.executable, "-m", "flowproof_cli", "inspect", trace],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
url = None
for line in inspect.stdout:
    if "?token=" in line:
        url = next(word for word in line.split() if word.startswith("http://"))
        break
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
opener.open(url, timeout=10).read()
base = f"http://127.0.0.1:{urlsplit(url).port}"
flows = []
for _ in range(300):
    flows = json.loads(opener.open(base + "/flows", timeout=10).read())
    if len(flows) >= 2:
        break
    __import__("time").sleep(0.1)
browser = subprocess.run(
    ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
     f"--user-data-dir={profile}", "--virtual-time-budget=10000",
     "--dump-dom", f"{url}#/flows/{flows[1]['id']}/request"],
    capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": profile})
inspect.send_signal(signal.SIGTERM)
_, inspect_err = inspect.communicate(timeout=30)
print(json.dumps({"dom": browser.stdout, "browser": browser.returncode,
                  "browser_err": browser.stderr[-2000:], "inspect": inspect.returncode,
                  "inspect_err": inspect_err}))
"""


def _browser_unavailable() -> str | None:
    """Why the browser test cannot run here, or None."""
    if shutil.which("chromium") is None:
        return "Debian's chromium is not installed (scripts/bootstrap.sh installs it as root)"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare/ip missing: Chromium must run without a network"
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        return f"cannot create a network namespace here: {probe.stderr.decode().strip()}"
    return None


@pytest.mark.slow
def test_chromium_shows_the_flow_list_and_the_conversation_view(tmp_path: Path) -> None:
    reason = _browser_unavailable()
    if reason is not None:
        pytest.skip(reason)
    profile = tmp_path / "chromium"
    profile.mkdir()
    done = run_command(
        [
            "unshare",
            "-n",
            "sh",
            "-c",
            'ip link set lo up && exec "$@"',
            "sh",
            sys.executable,
            "-c",
            _DRIVER,
            "specs/chat.trace.yaml",
            profile,
        ],
        timeout=300,
    )
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["browser"] == 0, report["browser_err"]
    dom = report["dom"]
    # the flow list: both turns, with their comments
    assert "turn 1, openai-chat, tools called: get_weather, get_time" in dom
    assert "turn 2, openai-chat, no tool called" in dom
    assert "/v1/chat/completions" in dom
    # the selected model flow's request, in the conversation view
    assert "flowproof conversation" in dom
    assert "system: You are a weather assistant." in dom
    assert "get_time result (mocked): " in dom
    assert report["inspect"] == 0, report["inspect_err"]
    assert "Traceback" not in report["inspect_err"]
