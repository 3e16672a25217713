"""flowproof as users install it: the wheel and the sdist, each built here and installed into
a clean virtualenv outside the checkout, then driven from an unrelated folder the way the
docs tell a user to: `init`, `record` against the fake upstream, `run`, `pytest` with the
plugin, `inspect`, and stock `mitmdump -s "$(flowproof addons path model)"` replaying the trace.

Nothing here may reach the network: the venvs install with `pip --no-index` from the
wheelhouse `make test`'s bootstrap fills (.deps/wheelhouse, scripts/bootstrap.sh), and the
test skips, saying so, when it is missing. Nothing of the checkout is on the installed
tool's path (no PYTHONPATH, the checkout's .venv off PATH): a module that is not shipped
fails here, not on a user's machine.
"""

from __future__ import annotations

import http.cookiejar
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, clean_environ, computed_once
from tests.e2e.sockets_and_pids import accepts, free_port
from tests.fakes.fake_upstream import FakeUpstream
from tests.unit.test_packaging import _copy_sources

pytestmark = pytest.mark.slow

WHEELHOUSE = REPO / ".deps" / "wheelhouse"
#: A stdlib agent: nothing but flowproof's own dependencies is in the wheelhouse.
AGENT = REPO / "tests" / "e2e" / "agents" / "py_exit_code.py"
PROMPT = "What is the weather in Nairobi?"
#: Set by the machine's pip configuration (mirrors, find-links): none of it may apply.
_PIP_SETTINGS = ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT")


def build(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The wheel and the sdist, built (`python -m build`, no network) from a copy of the
    sources, so the checkout gets no build/ or egg-info of this test's."""
    source = tmp_path_factory.mktemp("source")
    _copy_sources(source)
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return str(out)


@dataclass
class Installed:
    """A virtualenv holding one built artifact, and an unrelated folder to work in."""

    bin: Path
    work: Path
    home: Path

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The user's environment: the venv first on PATH, nothing of the checkout."""
        checkout_bin = str(Path(sys.executable).parent)
        path = [str(self.bin)] + [
            part for part in os.environ["PATH"].split(os.pathsep) if part != checkout_bin
        ]
        env = clean_environ(
            {"PATH": os.pathsep.join(path), "HOME": str(self.home), **(extra or {})}
        )
        for name in ("PYTHONPATH", "VIRTUAL_ENV", *_PIP_SETTINGS):
            env.pop(name, None)
        return env

    def run(
        self, command: Sequence[str], extra: Mapping[str, str] | None = None, timeout: float = 120
    ) -> CliResult:
        done = subprocess.run(
            list(command),
            env=self.env(extra),
            cwd=self.work,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return CliResult(done.returncode, done.stdout, done.stderr)


def install(artifact: Path, root: Path) -> Installed:
    """A fresh venv (outside the checkout) with `artifact` installed offline from the
    wheelhouse; the checkout's pip installs into it, so the venv needs none of its own."""
    base = getattr(sys, "_base_executable", sys.executable)  # a venv made by a venv nests badly
    venv = root / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
    pip += ["--quiet", "--no-index", "--find-links", str(WHEELHOUSE), str(artifact), "pytest"]
    environ = clean_environ({"PIP_CONFIG_FILE": os.devnull})  # the machine's config: mirrors
    for name in ("PYTHONPATH", *_PIP_SETTINGS):
        environ.pop(name, None)
    done = subprocess.run(
        pip, env=environ, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (root / "work").mkdir()
    (root / "home").mkdir()
    return Installed(venv / "bin", root / "work", root / "home")


def init_and_record(installed: Installed) -> None:
    """`flowproof init` writes the starter spec, its prompt is filled in, and `flowproof
    record` records it against the fake upstream, as the getting-started page goes."""
    shutil.copy(AGENT, installed.work / "agent.py")
    flowproof = str(installed.bin / "flowproof")
    done = installed.run([flowproof, "init", "--agent", "python agent.py"])
    assert done.code == 0, done.output
    spec = installed.work / "agent.flow.yaml"
    spec.write_text(spec.read_text().replace("Describe the task for the agent here.", PROMPT))
    with FakeUpstream(seed=1) as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        done = installed.run([flowproof, "record", "agent.flow.yaml"], upstream)
    assert done.code == 0, done.output


@pytest.fixture(scope="module", params=["whl", "tar.gz"], ids=["wheel", "sdist"])
def installed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Installed:
    """One venv per artifact, its flow initialised and recorded: once per session, whichever
    xdist worker asks first (the install is most of this module's time)."""
    if not (WHEELHOUSE / ".stamp").is_file():
        pytest.skip(f"no wheelhouse at {WHEELHOUSE}: run `make bootstrap` (it fills it)")
    if importlib.util.find_spec("build") is None:
        pytest.skip("the `build` package is missing from this venv: run `make bootstrap`")
    kind = request.param

    def compute() -> list[str]:
        dist = Path(
            computed_once(
                tmp_path_factory, "installed-package-dist", lambda: build(tmp_path_factory)
            )
        )
        (artifact,) = dist.glob(f"flowproof-*.{kind}")
        done = install(artifact, tmp_path_factory.mktemp(f"installed-{kind}"))
        init_and_record(done)
        return [str(done.bin), str(done.work), str(done.home)]

    bin_, work, home = computed_once(tmp_path_factory, f"installed-package-{kind}", compute)
    return Installed(Path(bin_), Path(work), Path(home))


def test_init_writes_the_spec_and_record_its_trace(installed: Installed) -> None:
    assert "python agent.py" in (installed.work / "agent.flow.yaml").read_text()
    assert PROMPT in (installed.work / "agent.trace.yaml").read_text()


def test_run_and_the_pytest_plugin_replay_it(installed: Installed) -> None:
    done = installed.run([str(installed.bin / "flowproof"), "run", "agent.flow.yaml"])
    assert done.code == 0, done.output
    assert "PASS" in done.stdout
    done = installed.run([str(installed.bin / "pytest"), "-q", "-p", "no:cacheprovider", "."])
    assert done.code == 0, done.output
    assert "1 passed" in done.stdout  # agent.flow.yaml, collected by the installed plugin


@contextmanager
def started(installed: Installed, command: Sequence[str]) -> Iterator[subprocess.Popen[str]]:
    """`command` in the installed environment, killed if the test did not stop it."""
    process = subprocess.Popen(
        list(command),
        env=installed.env(),
        cwd=installed.work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_inspect_serves_the_recorded_trace(installed: Installed) -> None:
    trace = installed.work / "agent.trace.yaml"
    with started(installed, [str(installed.bin / "flowproof"), "inspect", str(trace)]) as served:
        assert served.stdout is not None
        line = ""
        while "?token=" not in line:
            line = served.stdout.readline()
            assert line, "inspect ended before it printed its URL"
        url = next(word for word in line.split() if word.startswith("http://"))
        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        opener.open(url, timeout=10).read()  # the token sets mitmweb's auth cookie
        base = url.split("/?")[0]
        deadline = time.monotonic() + 60
        while not (flows := json.loads(opener.open(f"{base}/flows", timeout=10).read())):
            assert time.monotonic() < deadline, "no flow reached mitmweb"
            time.sleep(0.1)
        assert [flow["comment"].split(",")[0] for flow in flows] == ["turn 1"]
        os.killpg(served.pid, signal.SIGTERM)
        assert served.wait(timeout=30) == 0


def test_stock_mitmdump_replays_with_the_installed_addon(installed: Installed) -> None:
    trace = installed.work / "agent.trace.yaml"
    port = free_port()
    shell = (
        f'exec mitmdump -q -s "$(flowproof addons path model)" '
        f"--mode reverse:http://127.0.0.1:9@127.0.0.1:{port} "
        f"--set connection_strategy=lazy --set flowproof_trace={trace}"
    )
    with started(installed, ["bash", "-c", shell]) as proxy:
        deadline = time.monotonic() + 60
        while not accepts(port):
            assert proxy.poll() is None, proxy.communicate()[0]
            assert time.monotonic() < deadline, "mitmdump never listened"
            time.sleep(0.1)
        base = f"http://127.0.0.1:{port}/v1"
        agent = {"OPENAI_BASE_URL": base, "OPENAI_API_KEY": "k", "FLOWPROOF_PROMPT": PROMPT}
        done = installed.run(["python", "agent.py"], agent)
        other = installed.run(["python", "agent.py"], {**agent, "FLOWPROOF_PROMPT": "Oslo?"})
    assert done.code == 0, done.output
    recorded = trace.read_text()
    assert done.stdout.splitlines()[-1] in recorded  # the recorded reply, from the trace
    assert other.code != 0  # a prompt the trace never saw is refused
    assert "409" in other.stderr
