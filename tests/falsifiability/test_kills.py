"""Faults and kills: SIGINT, SIGTERM and SIGKILL of flowproof, at seeded random moments of
`record` and `run`, with a good trace in place, lose nothing and leave nothing.

After every kill: the trace is byte for byte the one in place before (a record that got to
finish rewrites the same bytes: the fake upstream is seeded), no temporary file is left
beside it or in the system temp folder (each case gets a TMPDIR of its own), no process of
the case outlives flowproof (each case marks flowproof's environment, which the agent, its
MCP stand-ins and their servers inherit), and no port flowproof or its children listened on
is still bound. SIGKILL runs no cleanup in flowproof: the keeper (flowproof_cli/process.py)
ends what is left.

FLOWPROOF_KILL_CASES sets the number of random moments (12 in `make test`, 100 in
`make test-stress`), spread over the three signals and the two modes; FLOWPROOF_KILL_SEED
picks other moments.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.process import PATH, Keeper
from tests.conftest import (
    REPO,
    clean_environ,
    computed_once,
    default_signals,
    run_cli,
    start_cli,
)
from tests.e2e.flows import AGENTS, agent_command, set_agent_env, write_flow
from tests.e2e.mcp_flows import NOTES_V2, PY, write_notes_flow
from tests.e2e.sockets_and_pids import (
    eventually,
    is_gone,
    listeners_of,
    still_listening,
)
from tests.fakes.fake_upstream import FakeUpstream, Reply, Script, sequence

SEED = int(os.environ.get("FLOWPROOF_KILL_SEED", "14"))
CASES = int(os.environ.get("FLOWPROOF_KILL_CASES", "12"))  # `make test-stress`: 100
WORKERS = 3  # cases at once: each mostly waits on its agent
EXIT_WAIT_S = 60
GONE_WAIT_S = 10
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
FLOWS = ("quick", "mcp")
MODES = ("record", "run")
#: Exit statuses a case may end with. 0: the flow finished before the signal arrived.
#: -SIGTERM: the signal came before flowproof set its handler (nothing started yet).
#: -SIGINT: Ctrl-C during an import; CPython then ends itself by SIGINT once flowproof has
#: printed `interrupted` (a shell reads it as 130 all the same).
ALLOWED = {
    signal.SIGINT: {0, 128 + signal.SIGINT, -signal.SIGINT},
    signal.SIGTERM: {0, 128 + signal.SIGTERM, -signal.SIGTERM},
    signal.SIGKILL: {0, -signal.SIGKILL},
}
#: A Ctrl-C while Python imports: it ends by SIGINT, or with 1 when `site` was importing.
STARTING_EXITS = {-signal.SIGINT, 1}
MCP_AGENT = AGENTS / "py_openai_mcp.py"
PROBE = AGENTS / "py_hygiene_probe.py"


# -- what a case leaves ------------------------------------------------------------------


def marked_pids(marker: bytes) -> set[int]:
    """Live processes whose environment holds the entry `marker`."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ and not is_gone(int(entry)):
            found.add(int(entry))
    return found


def leftovers(folder: Path) -> list[str]:
    """Temporary or candidate files below the flow's folder."""
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.name.endswith(".tmp") or ".candidate." in path.name
    )


# -- the flows ---------------------------------------------------------------------------


def mcp_script() -> Script:
    return sequence(
        Reply(tool_calls=[("write_note", json.dumps({"name": "a.txt", "text": "hello"}))]),
        Reply(tool_calls=[("read_note", json.dumps({"name": "a.txt"}))]),
        Reply(text="The note a.txt says hello."),
    )


def fake_for(flow: str) -> FakeUpstream:
    """The seeded upstream a record of `flow` talks to: same requests, same bytes back."""
    return (
        FakeUpstream(script=mcp_script(), seed=SEED) if flow == "mcp" else FakeUpstream(seed=SEED)
    )


def write_mcp_flow(folder: Path) -> Path:
    agent = {
        "command": agent_command(MCP_AGENT),
        "env": {"NOTES_DIR": "notes", "MCP_MODE": "auto"},
    }
    steps = [
        {"prompt": "Write hello to a.txt, then read it back."},
        {"assert_tool_call": "write_note where name equals a.txt"},
        {"assert": "reply contains says hello"},
    ]
    server = {"name": "notes", "command": f"{PY} {NOTES_V2}"}
    return write_notes_flow(folder, "notes agent", agent, server, steps=steps)


def spec_in(folder: Path, flow: str) -> Path:
    return folder / ("notes.flow.yaml" if flow == "mcp" else "weather.flow.yaml")


def trace_in(folder: Path, flow: str) -> Path:
    spec = spec_in(folder, flow)
    return spec.with_name(spec.name.replace(".flow.", ".trace."))


@dataclass
class Started:
    process: subprocess.Popen[bytes]
    marker: bytes
    tmpdir: Path
    stderr: Path


def start(
    mode: str,
    flow: str,
    folder: Path,
    scratch: Path,
    fake: FakeUpstream | None,
    spec: Path | None = None,
) -> Started:
    """flowproof MODE on the flow in `folder` (or `spec`), marked, with a temp folder of its
    own."""
    name = uuid.uuid4().hex
    tmpdir = scratch / f"tmp-{name}"
    tmpdir.mkdir()
    marker = f"FLOWPROOF_KILL_CASE={name}"
    extra = {"FLOWPROOF_KILL_CASE": name, "TMPDIR": str(tmpdir)}
    if fake is not None:
        extra["FLOWPROOF_AGENT_UPSTREAM"] = f"{fake.base_url}/v1"
    stderr = scratch / f"{name}.stderr"
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowproof_cli", mode, str(spec or spec_in(folder, flow))],
            env=clean_environ(extra),
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=default_signals,
        )
    return Started(process, marker.encode(), tmpdir, stderr)


# -- one case ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """An unstopped run: how long it took, and from when to when its agent's tree was up."""

    span: float
    agent_from: float
    agent_to: float


@dataclass(frozen=True)
class Case:
    number: int
    mode: str
    sig: signal.Signals
    flow: str
    delay_s: float
    #: Signal the moment the agent's tree is seen up, not after `delay_s`: the one moment
    #: of each mode and signal that load cannot move out of the agent's window.
    when_agent_up: bool = False


@dataclass
class Outcome:
    case: Case
    code: int | None
    live: bool  # the signal reached a running flowproof
    problems: list[str]
    starting: bool = False  # a Ctrl-C that landed before any flowproof code ran
    children: int = 0  # marked processes (agent, stand-ins, servers) alive at the signal
    ports: int = 0  # ports flowproof and they listened on at the signal
    window: Window | None = None  # unstopped (`wait_first`): when the agent's tree was up


def run_case(case: Case, pristine: Path, scratch: Path, *, wait_first: bool = False) -> Outcome:
    """Copy the flow, start flowproof, signal it after the case's delay (or, `wait_first`,
    let it finish), then check what it left."""
    folder = scratch / f"case-{case.number}"
    shutil.copytree(pristine, folder)
    good = trace_in(folder, case.flow).read_bytes()
    fake = fake_for(case.flow) if case.mode == "record" else None
    with fake if fake is not None else contextlib.nullcontext():
        started = start(case.mode, case.flow, folder, scratch, fake)
        window = watch(started) if wait_first else None
        if case.when_agent_up:
            wait_for_agent(started)
        else:
            time.sleep(case.delay_s)
        live = started.process.poll() is None
        marked = marked_pids(started.marker)
        ports = listeners_of({started.process.pid, *marked})
        children = agent_tree(started)
        if live:
            started.process.send_signal(case.sig)
        code = _exit_code(started.process)
    stderr = started.stderr.read_text(errors="replace")
    starting = case.sig is signal.SIGINT and interrupted_while_starting(stderr)
    problems = _problems(case, started, code, ports, stderr=stderr, starting=starting)
    if trace_in(folder, case.flow).read_bytes() != good:
        problems.append("the trace changed")
    if leftovers(folder):
        problems.append(f"left beside the trace: {leftovers(folder)}")
    return Outcome(case, code, live, problems, starting, len(children), len(ports), window)


def agent_tree(started: Started) -> list[str]:
    """The case's processes below flowproof (its agent, stand-ins, servers), keeper aside."""
    below = marked_pids(started.marker) - {started.process.pid}
    return [c for c in _commands(below) if "flowproof keeper" not in c]


def wait_for_agent(started: Started) -> None:
    """Until the agent's tree is up (or flowproof ended, or the exit wait passed)."""
    deadline = time.monotonic() + EXIT_WAIT_S
    while started.process.poll() is None and time.monotonic() < deadline:
        if agent_tree(started):
            return
        time.sleep(0.01)


def watch(started: Started) -> Window:
    """Wait for an unstopped flowproof to finish, noting when its agent's tree was up."""
    began, seen = time.monotonic(), []
    deadline = began + EXIT_WAIT_S
    while started.process.poll() is None and time.monotonic() < deadline:
        if agent_tree(started):
            seen.append(time.monotonic() - began)
        time.sleep(0.02)
    span = time.monotonic() - began
    return Window(span, seen[0] if seen else 0.0, seen[-1] if seen else span)


def _exit_code(process: subprocess.Popen[bytes]) -> int | None:
    """Its exit status; None (and killed) when it did not stop in time."""
    try:
        return process.wait(timeout=EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


#: What runs of flowproof's before its quiet interrupt handler is set (`cli/entry.py`).
BEFORE_THE_HANDLER = tuple(
    str(REPO / "flowproof_cli" / name)
    for name in ("__init__.py", "__main__.py", "cli/__init__.py", "cli/entry.py")
)


def interrupted_while_starting(stderr: str) -> bool:
    """Whether a Ctrl-C landed while Python itself was still starting: its own
    KeyboardInterrupt traceback, from `site`, `runpy` or the few lines of flowproof that run
    before its handler is set. Nothing had started, so nothing is left; once
    `cli/entry.py` has set its handler, an interrupt prints `interrupted` (exit 130)."""
    # Raised into an import, or into a callback Python then reports as "Exception ignored"
    # (`KeyboardInterrupt: ` with an empty message) while the start-up carries on.
    if not re.search(r"^KeyboardInterrupt:?\s*$", stderr, re.MULTILINE):
        return False
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', stderr)
    ours = str(REPO / "flowproof_cli")
    return all(
        not path.startswith(ours) or (name == "<module>" and path in BEFORE_THE_HANDLER)
        for path, name in frames
    )


def _problems(
    case: Case,
    started: Started,
    code: int | None,
    ports: dict[str, int],
    *,
    stderr: str,
    starting: bool,
) -> list[str]:
    problems: list[str] = []
    allowed = STARTING_EXITS if starting else ALLOWED[case.sig]
    if code is None:
        problems.append(f"flowproof did not stop within {EXIT_WAIT_S} s")
    elif code not in allowed:
        problems.append(f"exit status {code}; stderr: {stderr[-600:]}")
    if "Traceback" in stderr and not starting:
        problems.append(f"a traceback: {stderr[-1500:]}")
    if not eventually(lambda: not marked_pids(started.marker), GONE_WAIT_S):
        problems.append(f"processes outlived flowproof: {_commands(marked_pids(started.marker))}")
    if not eventually(lambda: not any(started.tmpdir.iterdir()), GONE_WAIT_S):
        problems.append(f"left in the temp folder: {sorted(os.listdir(started.tmpdir))}")
    if still := still_listening(ports):
        problems.append(f"ports still listening: {still}")
    return problems


def _commands(pids: set[int]) -> list[str]:
    commands = []
    for pid in sorted(pids):
        with contextlib.suppress(OSError):
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            commands.append(f"{pid}: {raw.replace(b'\0', b' ').decode(errors='replace')[:120]}")
    return commands


# -- the moments -------------------------------------------------------------------------


@dataclass
class Prepared:
    folders: dict[str, Path]  # flow -> a folder holding the flow and its good trace
    windows: dict[tuple[str, str], Window]  # (mode, flow) -> an unstopped run of it


def prepare(flow: str, root: Path) -> tuple[Path, dict[tuple[str, str], Window]]:
    """The flow recorded once; then a record over that trace and a replay, both unstopped
    and through a whole case, so their checks hold for runs nobody stops too (a finished
    record leaves the very bytes in place); when each one's agent was up."""
    folder = root / flow
    folder.mkdir()
    (write_mcp_flow if flow == "mcp" else write_flow)(folder)
    with fake_for(flow) as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"}
        result = run_cli("record", spec_in(folder, flow), cwd=folder, env=upstream)
    assert result.code == 0, result.output
    shutil.rmtree(folder / ".flowproof", ignore_errors=True)
    windows = {}
    for mode in MODES:
        case = Case(-1, mode, signal.SIGKILL, flow, delay_s=0.0)
        outcome = run_case(case, folder, root / f"unstopped-{mode}-{flow}", wait_first=True)
        assert outcome.code == 0 and not outcome.problems and outcome.window, outcome
        windows[(mode, flow)] = outcome.window
    return folder, windows


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    """Both flows with their good traces, and the unstopped runs the moments are drawn over:
    once per session (`computed_once`; every case copies the folders, none writes in them)."""
    stored = computed_once(tmp_path_factory, "kills-prepared", lambda: _prepare(tmp_path_factory))
    return Prepared(
        {flow: Path(folder) for flow, folder in stored["folders"].items()},
        {(mode, flow): Window(*window) for mode, flow, *window in stored["windows"]},
    )


def _prepare(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("pristine")
    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(FLOWS, pool.map(lambda flow: prepare(flow, root), FLOWS), strict=True))
    return {
        "folders": {flow: str(folder) for flow, (folder, _) in done.items()},
        "windows": [
            [mode, flow, window.span, window.agent_from, window.agent_to]
            for _, windows in done.values()
            for (mode, flow), window in windows.items()
        ],
    }


def cases_for(mode: str, sig: signal.Signals, windows: dict[tuple[str, str], Window]) -> list[Case]:
    """This mode and signal's share of the CASES seeded moments (every fourth round of them
    on the MCP flow). Each delay is drawn over the whole span of an unstopped run or, for
    about half of them (a seeded coin), over the part of it while the agent was up: where
    a kill has the most to leave behind. Plus one moment when the agent is seen up: the
    windows were measured on an unloaded run, and under load every drawn moment could
    miss the agent (a CI run's find), leaving the leftover check with nothing to say."""
    rng = random.Random(SEED)
    combos = [(m, s) for s in SIGNALS for m in MODES]
    chosen = []
    for number in range(CASES):
        flow = "mcp" if (number // len(combos)) % 4 == 3 else "quick"
        window = windows[(combos[number % len(combos)][0], flow)]
        whole = rng.random() < 0.5
        low, high = (0.0, window.span) if whole else (window.agent_from, window.agent_to)
        delay = rng.uniform(low, high)
        if combos[number % len(combos)] == (mode, sig):
            chosen.append(Case(number, mode, sig, flow, round(delay, 3)))
    return [*chosen, Case(CASES, mode, sig, "quick", 0.0, when_agent_up=True)]


@pytest.mark.slow
@pytest.mark.stress
@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
@pytest.mark.parametrize("mode", MODES)
def test_a_kill_at_a_random_moment_loses_and_leaves_nothing(
    mode: str, sig: signal.Signals, prepared: Prepared, tmp_path: Path
) -> None:
    cases = cases_for(mode, sig, prepared.windows)
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(lambda c: run_case(c, prepared.folders[c.flow], tmp_path), cases))
    failed = [o for o in outcomes if o.problems]
    live = sum(o.live for o in outcomes)
    starting = sum(o.starting for o in outcomes)
    mcp = sum(o.case.flow == "mcp" for o in outcomes)
    with_children = sum(o.children > 0 for o in outcomes)
    print(
        f"{mode} {sig.name}: {len(outcomes)} moments ({mcp} on the MCP flow), {live} while "
        f"flowproof ran ({starting} while Python was still starting it, {with_children} "
        f"with its agent's tree up, {sum(o.ports > 0 for o in outcomes)} with listeners)"
    )
    assert cases and not failed, "\n".join(
        f"case {o.case}: exit {o.code}: {'; '.join(o.problems)}" for o in failed
    )
    assert live, "no signal reached a running flowproof: the moments say nothing"
    assert with_children, "no moment found the agent up: the leftover check says nothing"


# -- the defects the moments found, each pinned ------------------------------------------


def hanging_probe(folder: Path, *, hang: bool = True) -> tuple[Path, Path]:
    """A flow whose agent forks an orphan, writes its pids and (`hang`) hangs after one model
    call; recorded (unhanging) first, so `run` has a trace."""
    probe = folder / "probe"
    probe.mkdir()
    spec = write_flow(folder, command=agent_command(PROBE), env={"HYGIENE_DIR": str(probe)})
    with fake_for("quick") as fake:
        result = run_cli(
            "record", spec, cwd=folder, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"}
        )
    assert result.code == 0, result.output
    for name in ("agent.pid", "orphan.pid", "proxy.port"):
        (probe / name).unlink()
    if hang:
        set_agent_env(spec, AGENT_HANG_AFTER="1")
    return spec, probe


def wait_for_probe(probe: Path, process: subprocess.Popen[bytes]) -> dict[str, int]:
    ready = lambda: all((probe / n).exists() for n in ("agent.pid", "orphan.pid", "proxy.port"))  # noqa: E731
    assert eventually(ready, 30), "the probe agent did not start"
    time.sleep(1.0)  # its first model call made, it hangs
    assert process.poll() is None
    return {n: int((probe / n).read_text()) for n in ("agent.pid", "orphan.pid", "proxy.port")}


@contextlib.contextmanager
def hanging_run(
    mode: str, spec: Path, probe: Path, folder: Path
) -> Iterator[tuple[Started, dict[str, int]]]:
    """flowproof MODE on `hanging_probe`'s flow (record: against the seeded fake), once its
    agent hangs: the run, and the pids and port the probe wrote."""
    scratch = folder / "scratch"
    scratch.mkdir()
    with fake_for("quick") as fake:
        started = start(
            mode, "quick", folder, scratch, fake if mode == "record" else None, spec=spec
        )
        yield started, wait_for_probe(probe, started.process)


@pytest.fixture
def reap() -> Iterator[list[int]]:
    """Pids to SIGKILL after the test, whatever it found: never leak a hanging agent."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_sigkill_of_flowproof_ends_its_agent_and_removes_its_temp_folders(
    mode: str, tmp_path: Path, reap: list[int]
) -> None:
    """Before the keeper, the agent lived on to its own timeout (10 minutes by default) and
    the proxy's CA folder stayed in the temp folder."""
    spec, probe = hanging_probe(tmp_path)
    with hanging_run(mode, spec, probe, tmp_path) as (started, pids):
        reap.extend([pids["agent.pid"], pids["orphan.pid"]])
        # The proxy's folder appears once its engine is up (the agent starts before that).
        assert eventually(lambda: any(started.tmpdir.iterdir()), 30), "no temp folder to lose"
        proxy = listeners_of({started.process.pid})
        assert pids["proxy.port"] in proxy.values(), proxy
        started.process.kill()
        assert started.process.wait(timeout=EXIT_WAIT_S) == -signal.SIGKILL
    assert eventually(lambda: is_gone(pids["agent.pid"]), GONE_WAIT_S), (
        "the agent outlived flowproof"
    )
    assert eventually(lambda: is_gone(pids["orphan.pid"]), GONE_WAIT_S), (
        "its orphan outlived flowproof"
    )
    assert eventually(lambda: not any(started.tmpdir.iterdir()), GONE_WAIT_S), sorted(
        os.listdir(started.tmpdir)
    )
    assert still_listening(proxy) == []
    assert not marked_pids(started.marker)


def _environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_sigkill_of_flowproof_ends_a_daemon_that_left_its_session_and_cleared_its_environment(
    mode: str, tmp_path: Path, reap: list[int]
) -> None:
    """Before, the keeper found an agent's descendants by the proxy URL in their environment:
    a daemon that called setsid() (out of the agent's process group) and cleared its
    environment survived a SIGKILL of flowproof, for its ten minutes of sleep."""
    spec, probe = hanging_probe(tmp_path)
    set_agent_env(spec, HYGIENE_DAEMON="1")
    with hanging_run(mode, spec, probe, tmp_path) as (started, pids):
        reap.extend([pids["agent.pid"], pids["orphan.pid"]])
        daemon = int((probe / "daemon.pid").read_text())
        reap.append(daemon)
        assert not is_gone(daemon), "the daemon did not start"
        assert _environ_of(daemon) == b"", "the daemon kept an environment to be found by"
        assert os.getsid(daemon) != os.getsid(pids["agent.pid"]), "it kept the agent's session"
        started.process.kill()
        assert started.process.wait(timeout=EXIT_WAIT_S) == -signal.SIGKILL
    assert eventually(lambda: is_gone(pids["agent.pid"]), GONE_WAIT_S), "the agent outlived it"
    assert eventually(lambda: is_gone(daemon), GONE_WAIT_S), "the daemon outlived flowproof"


@pytest.mark.slow
@pytest.mark.parametrize("hook", ["env_from", "before_each"])
def test_sigkill_of_flowproof_ends_a_running_suite_hook(
    hook: str, tmp_path: Path, reap: list[int]
) -> None:
    """Before, the keeper held agents' process groups but not the suite's hooks': a hook
    running when flowproof was SIGKILLed lived on (here: for five minutes)."""
    pid_file = tmp_path / "hook.pid"
    spec = write_flow(tmp_path, command="true")
    (tmp_path / "suite.yaml").write_text(
        yaml.safe_dump({hook: f"echo $$ > {pid_file}; exec sleep 300"})
    )
    process = start_cli(
        "record", spec, cwd=tmp_path, env={"FLOWPROOF_AGENT_UPSTREAM": "http://127.0.0.1:9/v1"}
    )
    reap.append(process.pid)
    assert eventually(lambda: pid_file.exists() and pid_file.read_text().strip(), 30), (
        "the hook did not start"
    )
    hook_pid = int(pid_file.read_text())
    reap.append(hook_pid)
    assert not is_gone(hook_pid)
    process.kill()
    assert process.wait(timeout=EXIT_WAIT_S) == -signal.SIGKILL
    assert eventually(lambda: is_gone(hook_pid), GONE_WAIT_S), "the hook outlived flowproof"


@pytest.mark.slow
def test_sigterm_stops_flowproof_when_its_output_pipes_are_closed(
    tmp_path: Path, reap: list[int]
) -> None:
    """A CI runner that gave up reading, then sent SIGTERM: the stop notice could not be
    written, and before the fix that error swallowed the SIGTERM (flowproof ran on)."""
    spec, probe = hanging_probe(tmp_path)
    process = start_cli("run", spec, cwd=tmp_path, text=False)
    pids = wait_for_probe(probe, process)
    reap.extend([process.pid, pids["agent.pid"], pids["orphan.pid"]])
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    process.stderr.close()
    process.send_signal(signal.SIGTERM)
    assert _exit_code(process) == 128 + signal.SIGTERM
    assert eventually(lambda: is_gone(pids["agent.pid"]), GONE_WAIT_S)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_again_during_the_cleanup_does_not_cut_it_short(
    mode: str, tmp_path: Path, reap: list[int]
) -> None:
    """An impatient user: Ctrl-C, then Ctrl-C again while the agent (ignoring SIGTERM) is
    given its grace period. Before the fix the second one raised KeyboardInterrupt inside the
    event loop: the cleanup stopped halfway, the agent lived on, and flowproof hung."""
    spec, probe = hanging_probe(tmp_path)
    set_agent_env(spec, HYGIENE_IGNORE_TERM="1")
    with hanging_run(mode, spec, probe, tmp_path) as (started, pids):
        reap.extend([started.process.pid, pids["agent.pid"], pids["orphan.pid"]])
        proxy = listeners_of({started.process.pid})
        assert pids["proxy.port"] in proxy.values(), proxy
        for _ in range(3):
            started.process.send_signal(signal.SIGINT)
            time.sleep(0.3)
        code = _exit_code(started.process)
    stderr = started.stderr.read_text()
    assert code == 128 + signal.SIGINT, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert "flowproof: still stopping the agent and the proxy" in stderr
    assert eventually(lambda: is_gone(pids["agent.pid"]), GONE_WAIT_S), "the agent outlived it"
    assert eventually(lambda: is_gone(pids["orphan.pid"]), GONE_WAIT_S)
    assert still_listening(proxy) == []
    assert eventually(lambda: not any(started.tmpdir.iterdir()), GONE_WAIT_S)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
def test_a_sigint_flowproof_was_told_to_ignore_stays_ignored(tmp_path: Path) -> None:
    """Started as a background job would be (SIGINT ignored), flowproof ignores a Ctrl-C as
    asked and the run goes on to pass; its agent inherits the same disposition, unchanged."""
    spec, probe = hanging_probe(tmp_path, hang=False)
    process = start_cli("run", spec, cwd=tmp_path, preexec_fn=_ignore_sigint)
    assert eventually(lambda: (probe / "agent.pid").exists(), 30), "the agent did not start"
    # Its orphan (forked by the agent, alive until the flow ends) has the agent's disposition.
    ignored = int(_status_field(int((probe / "orphan.pid").read_text()), "SigIgn"), 16)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=EXIT_WAIT_S)
    assert process.returncode == 0, stdout + stderr
    assert stdout.startswith("PASS: weather flow"), stdout
    assert ignored & (1 << (signal.SIGINT - 1)), "the agent's SIGINT was reset behind its back"


def _status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split()[1]
    raise AssertionError(f"no {name} in /proc/{pid}/status")


#: A trace write stopped between its temporary file and the rename, then killed.
_KILLED_WRITE = """
import os, sys, time
from pathlib import Path
from typing import Any
from flowproof_cli import process
def hang(fd):
    print("writing", flush=True)
    time.sleep(600)
process.os.fsync = hang
process.write_atomic(Path(sys.argv[1]), "flowproof_trace: 1\\n")
"""


def test_a_trace_write_killed_midway_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "x.trace.yaml"
    target.write_text("the good trace\n")
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITE, str(target)],
        env=clean_environ(),
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdout.readline() == b"writing\n"
    assert leftovers(tmp_path), "no temporary file while writing: the check says nothing"
    process.kill()
    process.wait(timeout=EXIT_WAIT_S)
    assert eventually(lambda: not leftovers(tmp_path), GONE_WAIT_S), leftovers(tmp_path)
    assert target.read_text() == "the good trace\n"


# -- the keeper itself ---------------------------------------------------------------------

#: A stand-in for flowproof: it has the keeper hold two sleepers' groups, a marker a third
#: sleeper carries, and two folders; releases one group and one folder; then waits to die.
_HOLDER = """
import os, subprocess, sys, tempfile, time
from flowproof_cli.keeper import GROUP, MARKER, PATH
from flowproof_cli.process import KEEPER
sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
kept, freed = (subprocess.Popen(sleep, start_new_session=True) for _ in range(2))
marked = subprocess.Popen(sleep, start_new_session=True, env={**os.environ, "KEPT": sys.argv[2]})
kept_dir, freed_dir = (tempfile.mkdtemp(dir=sys.argv[1]) for _ in range(2))
for kind, value in ((GROUP, kept.pid), (GROUP, freed.pid), (MARKER, "KEPT=" + sys.argv[2]),
                    (PATH, kept_dir), (PATH, freed_dir)):
    KEEPER.hold(kind, value)
KEEPER.release(GROUP, freed.pid)
KEEPER.release(PATH, freed_dir)
print(*KEEPER.pids(), kept.pid, freed.pid, marked.pid, kept_dir, freed_dir, flush=True)
if sys.argv[3] == "exit":
    for kind, value in ((GROUP, kept.pid), (MARKER, "KEPT=" + sys.argv[2]), (PATH, kept_dir)):
        KEEPER.release(kind, value)
    sys.exit(0)
time.sleep(600)
"""


def holder(tmp_path: Path, ending: str, reap: list[int]) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path), uuid.uuid4().hex, ending],
        env=clean_environ(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    seen = process.stdout.readline().split()
    reap.extend(int(pid) for pid in seen[1:4])  # the sleepers, whatever the test found
    return process, seen


def test_the_keeper_ends_what_a_killed_owner_held_and_nothing_it_released(
    tmp_path: Path, reap: list[int]
) -> None:
    process, seen = holder(tmp_path, "kill", reap)
    keeper, kept, freed, marked = map(int, seen[:4])
    kept_dir, freed_dir = map(Path, seen[4:])
    process.kill()
    process.wait(timeout=EXIT_WAIT_S)
    assert eventually(lambda: is_gone(kept), GONE_WAIT_S), "a held group outlived its owner"
    assert eventually(lambda: is_gone(marked), GONE_WAIT_S), "a marked process outlived it"
    assert eventually(lambda: not kept_dir.exists(), GONE_WAIT_S), "a held folder stayed"
    assert eventually(lambda: is_gone(keeper), GONE_WAIT_S), "the keeper outlived its work"
    assert not is_gone(freed), "a released group was killed"
    assert freed_dir.is_dir(), "a released folder was removed"


def test_the_keeper_does_nothing_when_its_owner_exits_having_released_all(
    tmp_path: Path, reap: list[int]
) -> None:
    process, seen = holder(tmp_path, "exit", reap)
    keeper, kept, freed, marked = map(int, seen[:4])
    assert process.wait(timeout=EXIT_WAIT_S) == 0
    assert eventually(lambda: is_gone(keeper), GONE_WAIT_S), "the keeper outlived its owner"
    assert not any(map(is_gone, (kept, freed, marked))), "a released process was killed"
    assert all(Path(folder).is_dir() for folder in seen[4:]), "a released folder was removed"


def test_a_keeper_that_cannot_start_never_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """No keeper (no such interpreter, a process limit): clean-up stays in-process, as
    before; holding and releasing still work and raise nothing."""
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    keeper = Keeper()
    keeper.hold(PATH, "/nonexistent/held")
    keeper.release(PATH, "/nonexistent/held")
    with keeper.holding(PATH, "/nonexistent/other"):
        assert keeper.pids() == set()


def test_only_pythons_own_start_up_interrupt_is_tolerated() -> None:
    ignored = (
        "Exception ignored in: <function KeyedRef.remove at 0x1>\nTraceback (most recent call "
        'last):\n  File "<frozen importlib._bootstrap>", line 86, in remove\nKeyboardInterrupt: \n'
    )
    assert interrupted_while_starting(ignored)
    ours = f'Traceback:\n  File "{REPO}/flowproof_cli/runner/job.py", line 9, in run\nKeyboardInterrupt\n'
    assert not interrupted_while_starting(ours)
    # An import after the handler was set is flowproof's to answer, no longer tolerated.
    loading = f'Traceback:\n  File "{REPO}/flowproof_cli/cli/main.py", line 12, in <module>\nKeyboardInterrupt\n'
    assert not interrupted_while_starting(loading)
