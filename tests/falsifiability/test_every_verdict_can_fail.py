"""Every verdict flowproof gives can FAIL: each case of cases.py, through the real CLI.

Two base flows are recorded once against the scripted fake upstream; each case is a copy
with one change (a step, an agent knob, a trace edit) and must fail with its exit code and
message, while its twin (the change undone) must pass. The cases run grouped: one
directory run with `--json` for the replay group, one inside a network namespace, one for
the controls and their audits, and one command per error class. The recordings and the
group runs happen once per session (`computed_once`): a worker that gets some of this
module's tests after another ran them reads their results instead of running them again.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.verdict import Failure
from tests.conftest import CliResult, computed_once, run_cli, run_command, start_cli
from tests.e2e.sockets_and_pids import free_port
from tests.fakes.fake_upstream import FakeUpstream, Reply, sequence
from tests.falsifiability import cases
from tests.falsifiability.cases import (
    AUDITS,
    CASES,
    COMMANDS,
    RUN_ENV,
    SECRET,
    SPEC_FILE,
    TRACE_FILE,
    AuditCase,
    Case,
    CommandCase,
    encoded,
    write_case,
)

pytestmark = pytest.mark.slow

JOBS = "8"  # flows at once in a group run: the agents mostly wait on the proxy
_CODES = {"passed": 0, "skipped": 0, "failed": 1, "error": 2}
_RECORD_CODES = {"pass": 0, "skipped": 0, "fail": 1, "error": 2}  # a run record's statuses


# -- the recordings --------------------------------------------------------------------------


def _script() -> Any:
    """The fake model's three turns: two tool calls, one more, then the reply."""
    first = [("get_weather", json.dumps(cases.WEATHER_ARGS)), ("get_time", "{}")]
    second = [("get_weather", json.dumps(cases.SECOND_ARGS))]
    return sequence(Reply(tool_calls=first), Reply(tool_calls=second), Reply(text=cases.REPLY))


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each base flow recorded once: its trace as data, for every case to copy and edit."""
    traces: dict[str, dict[str, Any]] = computed_once(
        tmp_path_factory, "verdict-recordings", lambda: _record_bases(tmp_path_factory)
    )
    return traces


def _record_bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    traces = {}
    for base in cases.BASES:
        spec = tmp_path_factory.mktemp(f"recorded-{base}") / SPEC_FILE
        base_case = Case("base", base, (), "", base=base)
        spec.write_text(yaml.safe_dump(cases.spec_of(base_case), sort_keys=False))
        with FakeUpstream(script=_script(), seed=1) as fake:
            result = run_cli(
                "record",
                spec,
                env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"},
                cwd=spec.parent,
            )
        assert result.code == 0, result.output
        traces[base] = yaml.safe_load(spec.with_name(TRACE_FILE).read_text())
    return traces


# -- the services a url agent is pointed at -----------------------------------------------------


class _Answering(BaseHTTPRequestHandler):
    status = 200
    body = b"done"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(self.status)
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        return


class _Failing(_Answering):
    status = 500
    body = b"boom"


class _HangingUp(_Answering):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.close_connection = True  # no status line at all


@pytest.fixture(scope="module")
def services() -> Iterator[dict[str, str]]:
    """Loopback services for the url cases, by placeholder name."""
    servers = {
        name: ThreadingHTTPServer(("127.0.0.1", 0), handler)
        for name, handler in (("ok", _Answering), ("failing", _Failing), ("closing", _HangingUp))
    }
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    silent, busy = socket.socket(), socket.socket()
    for held in (silent, busy):  # accept nothing: a connect lands in the backlog
        held.bind(("127.0.0.1", 0))
        held.listen(64)
    values = {name: str(server.server_address[1]) for name, server in servers.items()}
    values |= {
        "silent": str(silent.getsockname()[1]),
        "busy": str(busy.getsockname()[1]),
        "closed": str(free_port()),
    }
    try:
        yield values
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()
        silent.close()
        busy.close()


# -- group runs ------------------------------------------------------------------------------------


@dataclass
class GroupRun:
    root: Path
    result: CliResult
    payload: dict[str, Any]
    flows: dict[str, dict[str, Any]]  # by case folder name
    values: dict[str, str]  # the services' ports the cases were written with

    def flow(self, name: str) -> dict[str, Any]:
        assert name in self.flows, f"no result for {name}:\n{self.result.output[-3000:]}"
        return self.flows[name]


def _stored(root: Path, result: CliResult, values: Mapping[str, str]) -> dict[str, Any]:
    """A group run as plain data, for `computed_once`."""
    return {"root": str(root), "result": asdict(result), "values": dict(values)}


def _write_group(
    group: str, root: Path, recordings: Mapping[str, Any], values: Mapping[str, str]
) -> list[Case]:
    """Every case of `group`, its twin and a baseline per recording, written below root."""
    written = [case for case in CASES if case.group == group]
    written += [twin for case in written if (twin := case.twin_case()) is not None]
    if group == "replay":
        written += [Case("base", f"baseline-{b}", (), "", code=0, base=b) for b in cases.BASES]
    for case in written:
        write_case(
            case, root / case.folder, recordings[case.base], values, lambda: str(free_port())
        )
    return written


def _parse(stored: Mapping[str, Any]) -> GroupRun:
    root, result = Path(stored["root"]), CliResult(**stored["result"])
    try:
        payload = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"the run printed no JSON (exit {result.code}):\n{result.output[-3000:]}")
    flows = {Path(flow["spec_path"]).parent.name: flow for flow in payload["flows"]}
    return GroupRun(root, result, payload, flows, stored["values"])


@pytest.fixture(scope="module")
def replay_run(
    recordings: dict[str, Any], services: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> GroupRun:
    def run() -> dict[str, Any]:
        root = tmp_path_factory.mktemp("replay-group")
        _write_group("replay", root, recordings, services)
        result = run_cli("run", root, "--json", "-j", JOBS, env=RUN_ENV, timeout=600)
        return _stored(root, result, services)

    return _parse(computed_once(tmp_path_factory, "verdict-replay-group", run))


def _netns_problem() -> str | None:
    from flowproof_cli.egress import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        return f"egress containment is unavailable here: {reason}"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return f"cannot create a network namespace here: {probe.stderr.decode().strip()}"
    return None


def run_in_netns(*args: str | Path, env: Mapping[str, str]) -> CliResult:
    """`flowproof ARGS` in a network namespace of its own with only loopback up."""
    command = [
        "unshare",
        "-n",
        "sh",
        "-c",
        'ip link set lo up && exec "$0" "$@"',
        sys.executable,
        "-m",
        "flowproof_cli",
        *map(str, args),
    ]
    return run_command(command, env=env, timeout=300)


@pytest.fixture(scope="module")
def netns_run(recordings: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> GroupRun:
    problem = _netns_problem()
    if problem is not None:
        pytest.skip(problem)

    def run() -> dict[str, Any]:
        root = tmp_path_factory.mktemp("netns-group")
        _write_group("netns", root, recordings, {})
        return _stored(root, run_in_netns("run", root, "--json", env=RUN_ENV), {})

    return _parse(computed_once(tmp_path_factory, "verdict-netns-group", run))


# -- checks --------------------------------------------------------------------------------------


def _where(case: Case, flow: Mapping[str, Any]) -> str:
    if case.look == "stdout":
        return str(flow["stdout_tail"])
    failures = [Failure.from_json(failure).text for failure in flow["failures"]]
    return "\n".join([*failures, flow["error"] or ""])


def check_flow(case: Case, group: GroupRun, values: Mapping[str, str]) -> None:
    """The flow ended with the case's exit code and says the case's message."""
    flow = group.flow(case.folder)
    folder = group.root / case.folder
    said = _where(case, flow)
    assert _CODES[flow["status"]] == case.code, f"{case.name}: {flow['status']}\n{said}"
    expected = cases.expected(case.message, {**values, "dir": str(folder.resolve())})
    assert expected.search(said), f"{case.name}: expected {expected.pattern!r} in:\n{said}"


def check_twin(case: Case, group: GroupRun) -> None:
    twin = case.twin_case()
    assert twin is not None
    flow = group.flow(twin.folder)
    assert flow["status"] == "passed", f"{twin.folder}: {_where(twin, flow)}"


def _ids(items: Any) -> list[str]:
    return [f"{item.kind}-{item.name}" for item in items]


REPLAY = [case for case in CASES if case.group == "replay"]
NETNS = [case for case in CASES if case.group == "netns"]


@pytest.mark.parametrize("case", REPLAY, ids=_ids(REPLAY))
def test_case_fails(case: Case, replay_run: GroupRun) -> None:
    check_flow(case, replay_run, replay_run.values)


TWINNED = [case for case in REPLAY if case.twin is not None]


@pytest.mark.parametrize("case", TWINNED, ids=_ids(TWINNED))
def test_twin_passes(case: Case, replay_run: GroupRun) -> None:
    check_twin(case, replay_run)


def test_replay_group_exit_code_and_baselines(replay_run: GroupRun) -> None:
    """The run exits 2 (a flow is an error) and both unchanged copies of a recording pass."""
    assert replay_run.result.code == 2, replay_run.result.stderr[-3000:]
    assert replay_run.payload["exit_code"] == 2
    for base in cases.BASES:
        assert replay_run.flow(f"base-baseline-{base}")["status"] == "passed"


def test_no_leak_case_prints_the_secret(replay_run: GroupRun) -> None:
    """A leak is named by variable, place and encoding, never by its value: the agent
    printed each reply holding it, and the verdict shows the marker instead."""
    printed = replay_run.result.stderr + json.dumps(replay_run.payload, ensure_ascii=False)
    for encoding in cases.SECRET_ENCODINGS:
        assert encoded(encoding) not in printed, encoding
        case = next(case for case in CASES if case.name == cases.leak_name(encoding))
        marker = "[redacted ${" + cases.SECRET_VARIABLE + "}]"
        assert marker in replay_run.flow(case.folder)["stdout_tail"], encoding
    assert SECRET not in printed


@pytest.mark.parametrize("case", NETNS, ids=_ids(NETNS))
def test_case_fails_in_a_network_namespace(case: Case, netns_run: GroupRun) -> None:
    check_flow(case, netns_run, {})
    if case.twin is not None:
        check_twin(case, netns_run)


# -- controls and audits ---------------------------------------------------------------------------


@dataclass
class ControlRuns:
    root: Path
    first: dict[str, Any]  # the first run's record
    audits: dict[str, CliResult]  # by stage (cases.AuditCase)
    values: dict[str, str]  # the services' ports the controls were written with


def _record(root: Path) -> dict[str, Any]:
    runs = sorted((root / ".flowproof" / "runs").iterdir())
    return json.loads((runs[-1] / "report.json").read_text())


def _controlled(name: str, **extra: Any) -> Case:
    spec = {"control": {"id": f"ctl.{name}"}}
    return Case("control", name, (), "", code=0, spec=spec, group="controls", **extra)


@pytest.fixture(scope="module")
def control_runs(
    recordings: dict[str, Any], services: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> ControlRuns:
    """Run the controls, audit; make one regress and remove one, run again, audit since the
    first; then change one judged file and remove another, and verify."""
    stored = computed_once(
        tmp_path_factory,
        "verdict-control-runs",
        lambda: _run_controls(recordings, services, tmp_path_factory),
    )
    audits = {stage: CliResult(**result) for stage, result in stored["audits"].items()}
    return ControlRuns(Path(stored["root"]), stored["first"], audits, stored["values"])


def _run_controls(
    recordings: dict[str, Any], services: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("controls-group")
    _write_group("controls", root, recordings, services)
    for extra in (_controlled("passing"), _controlled("removed")):
        write_case(extra, root / extra.folder, recordings["model"], services, str)
    run_cli("run", root, "--json", env=RUN_ENV)
    first = _record(root)
    audits = {"first": run_cli("audit", root)}
    passing = root / "control-passing" / SPEC_FILE
    spec = yaml.safe_load(passing.read_text())
    spec["steps"].append({"assert_tool_call": "delete_city"})
    passing.write_text(yaml.safe_dump(spec, sort_keys=False))
    for path in (root / "control-removed").iterdir():
        path.unlink()
    (root / "control-removed").rmdir()
    run_cli("run", root, "--json", env=RUN_ENV)
    audits["since"] = run_cli("audit", root, "--since", first["id"])
    changed = root / "control-failed" / TRACE_FILE
    changed.write_text(changed.read_text() + "\n")
    (root / "control-passing" / TRACE_FILE).unlink()
    audits["verify"] = run_cli("audit", root, "--verify")
    stored = {stage: asdict(result) for stage, result in audits.items()}
    return {"root": str(root), "first": first, "audits": stored, "values": dict(services)}


CONTROL_CASES = [case for case in CASES if case.group == "controls"]


@pytest.mark.parametrize("case", CONTROL_CASES, ids=_ids(CONTROL_CASES))
def test_control_fails(case: Case, control_runs: ControlRuns) -> None:
    """The control's row in the run record: its verdict, and the reason it did not pass."""
    rows = {Path(flow["spec"]).parent.name: flow for flow in control_runs.first["flows"]}
    flow = rows[case.folder]
    row = flow["control"]
    assert row is not None, flow
    assert _RECORD_CODES[flow["status"]] == case.code, flow
    assert row["verdict"] == case.verdict, row
    assert cases.expected(case.message, control_runs.values).search(row["reason"] or ""), row


def test_a_passing_control_passes(control_runs: ControlRuns) -> None:
    rows = {flow["control"]["id"]: flow["control"] for flow in control_runs.first["flows"]}
    assert rows["ctl.passing"]["verdict"] == "pass", rows["ctl.passing"]


@pytest.mark.parametrize("audit", AUDITS, ids=[audit.name for audit in AUDITS])
def test_audit_fails(audit: AuditCase, control_runs: ControlRuns) -> None:
    result = control_runs.audits[audit.stage]
    assert result.code == audit.code, result.output
    assert cases.expected(audit.message, {}).search(result.output), result.output


# -- one command per error class and exit code -------------------------------------------------------


def _command_folder(root: Path, recordings: Mapping[str, Any], **changes: Any) -> Path:
    case = Case("error", "flow", (), "", **changes)
    return write_case(case, root / "flow", recordings["model"], {}, lambda: str(free_port()))


def _until_marked(process: subprocess.Popen[str], mark: Path) -> None:
    """Wait (bounded) until the hanging agent says it runs."""
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the agent never started"
        time.sleep(0.05)


def _signalled(root: Path, recordings: Mapping[str, Any], signum: int) -> CliResult:
    """A replay whose agent hangs, ended by `signum` once the agent runs."""
    mark = root / "mark"
    spec = _command_folder(root, recordings, env={"FP_HANG": "1", "FP_MARK": str(mark)})

    process = start_cli("run", spec)  # SIGINT and SIGTERM at their defaults, however started
    try:
        _until_marked(process, mark)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    return CliResult(process.returncode, stdout, stderr)


#: Faults injected into a real CLI process (`python -c PATCH run SPEC`), then the CLI runs.
_FAULTS = {
    # The filter's listener cannot be taken from the agent (only the handover: the
    # capability probe still succeeds).
    "containment-fault": """
import errno, sys
from flowproof_cli.egress import kernel
real = kernel.pidfd_getfd
def refused(pidfd, target):
    if sys._getframe(1).f_code.co_name == "_take_listener":
        raise OSError(errno.EPERM, "Operation not permitted")
    return real(pidfd, target)
kernel.pidfd_getfd = refused
""",
    # A host flowproof cannot contain an agent on.
    "capability-host": """
from flowproof_cli.egress import launcher
launcher.unavailable_reason = lambda: "egress containment supports x86_64 only; this machine is aarch64"
""",
}
_RUN_CLI = """
import sys
sys.argv[0] = "flowproof"
from flowproof_cli.cli.main import main
main()
"""


def _faulted(fault: str, *args: str | Path) -> CliResult:
    return run_command([sys.executable, "-c", _FAULTS[fault] + _RUN_CLI, *args])


def _record_with_header_leak(root: Path, recordings: Mapping[str, Any]) -> CliResult:
    """Record an agent that sends the declared secret in a header of its own: the upstream
    received it, so the flow fails, and no trace is written."""
    header = {"FP_HEADER": "x-debug-token=${" + cases.SECRET_VARIABLE + "}"}
    steps = ({"assert_no_secret_leak": "${" + cases.SECRET_VARIABLE + "}"},)
    spec = _command_folder(root, recordings, env=header, steps=steps)
    spec.with_name(TRACE_FILE).unlink()
    with FakeUpstream(script=_script(), seed=1) as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        result = run_cli("record", spec, env={**RUN_ENV, **upstream})
        assert fake.requests[0].headers["x-debug-token"] == SECRET  # it did cross
    assert not spec.with_name(TRACE_FILE).exists()
    return result


def _duplicate_control(root: Path, recordings: Mapping[str, Any]) -> CliResult:
    """Two flows of one directory run declare the same control id."""
    for name in ("one", "two"):
        case = Case("control", name, (), "", spec={"control": {"id": "ctl.twice"}})
        write_case(case, root / name, recordings["model"], {}, str)
    return run_cli("run", root)


def _rainy(trace: dict[str, Any]) -> dict[str, Any]:
    edited = json.loads(json.dumps(trace))
    message = edited["turns"][-1]["response"]["body"]["choices"][0]["message"]
    message["content"] = "The weather in Nairobi is rainy."
    return edited


def _diff(root: Path, recordings: Mapping[str, Any]) -> CliResult:
    """`flowproof diff OLD NEW` of two traces whose replies differ."""
    old, new = root / "old.trace.yaml", root / "new.trace.yaml"
    old.write_text(yaml.safe_dump(recordings["model"], sort_keys=False))
    new.write_text(yaml.safe_dump(_rainy(recordings["model"]), sort_keys=False))
    return run_cli("diff", old, new)


def _rerecord(root: Path, recordings: Mapping[str, Any]) -> CliResult:
    """A record whose trajectory changed, with no terminal and no --yes: not approved, the
    trace is kept and the recording waits beside it."""
    spec = _command_folder(root, recordings)
    trace = spec.with_name(TRACE_FILE).read_bytes()
    first = [("get_weather", json.dumps(cases.WEATHER_ARGS)), ("get_time", "{}")]
    second = [("get_weather", json.dumps(cases.SECOND_ARGS))]
    script = sequence(Reply(tool_calls=first), Reply(tool_calls=second), Reply(text="It is rainy."))
    with FakeUpstream(script=script, seed=1) as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        result = run_cli("record", spec, env=upstream)
    assert spec.with_name(TRACE_FILE).read_bytes() == trace
    assert spec.with_name("case.trace.candidate.yaml").exists()
    return result


_MORE_COMMANDS = {
    "duplicate-control": _duplicate_control,
    "diff": _diff,
    "rerecord": _rerecord,
}


#: flowproof's own environment for each Bedrock record case (the upstream is never reached).
_BEDROCK_ENV = {
    "bedrock-no-credentials": {"FLOWPROOF_UPSTREAM_BEDROCK": "http://127.0.0.1:9"},
    "bedrock-half-credentials": {"AWS_ACCESS_KEY_ID": "AKIAFALSIFIABILITY01"},
    "bedrock-unsigned": {},
    "bedrock-no-region": {
        "AWS_ACCESS_KEY_ID": "AKIAFALSIFIABILITY01",
        "AWS_SECRET_ACCESS_KEY": "falsifiability/secret/0123456789",
    },
}


def _bedrock_record(setup: str, root: Path, recordings: Mapping[str, Any]) -> CliResult:
    """A record whose agent calls Bedrock (unsigned) with flowproof's AWS setup broken."""
    spec = _command_folder(root, recordings, env={"FP_PROTOCOL": "bedrock"})
    trace = spec.with_name(TRACE_FILE).read_bytes()
    upstream = {
        "FLOWPROOF_AGENT_UPSTREAM": f"http://127.0.0.1:{free_port()}",
        **_BEDROCK_ENV[setup],
    }
    result = run_cli("record", spec, env=upstream)
    assert spec.with_name(TRACE_FILE).read_bytes() == trace  # the good trace is kept
    return result


def _run_command(setup: str, root: Path, recordings: Mapping[str, Any], busy: int) -> CliResult:
    """Prepare what `setup` names, and run its command."""
    if setup == "bad-spec":
        return run_cli("run", _command_folder(root, recordings, spec={"stepz": []}))
    if setup == "no-trace":
        spec = _command_folder(root, recordings)
        spec.with_name(TRACE_FILE).unlink()
        return run_cli("run", spec)
    if setup == "trace-version":
        spec = _command_folder(root, recordings)
        trace = spec.with_name(TRACE_FILE)
        version = re.compile(r"^flowproof_trace: \d+$", re.MULTILINE)
        trace.write_text(version.sub("flowproof_trace: 99", trace.read_text(), count=1))
        return run_cli("run", spec)
    if setup in ("trace-cut", "trace-interim"):
        spec = _command_folder(root, recordings)
        trace = spec.with_name(TRACE_FILE)
        lines = trace.read_text().splitlines(keepends=True)
        if setup == "trace-cut":  # whole lines cut off its end
            lines = lines[:-5]
        else:
            lines[lines.index("    status: 200\n")] = "    status: 100\n"
        trace.write_text("".join(lines))
        return run_cli("run", spec)
    if setup == "no-upstream":
        return run_cli("record", _command_folder(root, recordings))
    if setup == "busy-port":
        agent = {"command": None, "env": None, "url": "http://127.0.0.1:9/run", "proxy_port": busy}
        return run_cli("run", _command_folder(root, recordings, agent=agent))
    if setup == "init-over":
        spec = _command_folder(root, recordings)
        return run_cli("init", "--agent", cases.AGENT, "--out", spec)
    if setup == "no-agent":
        return run_cli("run", _command_folder(root, recordings, agent={"command": "fp-no-agent"}))
    if setup == "containment-fault":
        spec = _command_folder(root, recordings, agent={"allow_egress": []})
        return _faulted(setup, "run", spec)
    if setup == "capability-host":
        control = {"control": {"id": "ctl.contained"}}
        spec = _command_folder(root, recordings, steps=("assert_no_egress",), spec=control)
        return _faulted(setup, "run", spec, "--json")
    if setup == "upstream-down":
        spec = _command_folder(root, recordings)
        trace = spec.with_name(TRACE_FILE).read_bytes()
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"http://127.0.0.1:{free_port()}/v1"}
        result = run_cli("record", spec, env=upstream)
        assert spec.with_name(TRACE_FILE).read_bytes() == trace  # the good trace is kept
        return result
    if setup == "provider-no-upstream":  # the agent speaks OpenAI; only Anthropic is set
        spec = _command_folder(root, recordings)
        anthropic = {"FLOWPROOF_UPSTREAM_ANTHROPIC": f"http://127.0.0.1:{free_port()}"}
        return run_cli("record", spec, env=anthropic)
    if setup.startswith("bedrock-"):
        return _bedrock_record(setup, root, recordings)
    if setup == "record-header-leak":
        return _record_with_header_leak(root, recordings)
    if setup in _MORE_COMMANDS:
        return _MORE_COMMANDS[setup](root, recordings)
    if setup == "failing-flow":
        steps = ({"assert_tool_call": "delete_city"},)
        return run_cli("run", _command_folder(root, recordings, steps=steps))
    if setup in ("sigterm", "sigint"):
        signum = signal.SIGTERM if setup == "sigterm" else signal.SIGINT
        return _signalled(root, recordings, signum)
    raise AssertionError(f"no setup named {setup}")


@pytest.mark.parametrize("command", COMMANDS, ids=[command.name for command in COMMANDS])
def test_command_fails(
    command: CommandCase,
    recordings: dict[str, Any],
    services: dict[str, str],
    tmp_path: Path,
) -> None:
    """The command's own exit code, its message, and never a traceback."""
    if command.setup in _FAULTS and _netns_problem() is not None:
        pytest.skip(str(_netns_problem()))
    result = _run_command(command.setup, tmp_path, recordings, int(services["busy"]))
    assert result.code == command.code, result.output
    assert cases.expected(command.message, {}).search(result.output), result.output
    assert "Traceback" not in result.output, result.output
    if command.code == 2:
        assert result.stderr.startswith("error: "), result.stderr
