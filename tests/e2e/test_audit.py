"""Run records and `flowproof audit` through the real CLI.

Audit reads records only, so most of its verdicts are checked on records written by the
record writer itself (fast, no agent). The tests marked slow run real flows: the records
that `record` and `run` (a spec, a directory, `-j 1` and `-j N`) leave, the control rows of
a pass, a failure and a capability error, `--since` and `--verify` on real runs, and a run
whose record cannot be written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.evidence.records import RUNS, RunRecord, file_sha256, load_run, run_ids
from flowproof_cli.verdict import Failure, FlowResult
from tests.conftest import REPO, CliResult, clean_environ, run_cli
from tests.e2e.flows import write_flow
from tests.e2e.test_url_driver import Service, start_service, write_url_flow  # noqa: F401
from tests.fakes.fake_upstream import FakeUpstream

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
NO_RECORD = "no run record in {runs}. Fix: run the flows first: `flowproof run {root}`"


# -- records written by the record writer, audited by the CLI (fast) -----------------------


def row(control_id: str, verdict: str, **extra: Any) -> FlowResult:
    """A flow result carrying a control row in `verdict`."""
    result = FlowResult(
        f"{control_id} flow", Path(f"{control_id}.flow.yaml"), "replay", Path("t.trace.yaml")
    )
    if verdict != "pass":
        result.failures = [Failure(extra.pop("reason", f"{control_id} went wrong"))]
    result.control = {
        "id": control_id,
        "title": None,
        "verdict": verdict,
        "reason": None if verdict == "pass" else result.failures[0],
        "lanes": extra.pop("lanes", ["egress"]),
        "containment": extra.pop("containment", "enforced (linux seccomp)"),
        "evidence": {"trace": "t.trace.yaml", "blocked": []},
    }
    return result


def recorded_run(root: Path, minute: int, *results: FlowResult) -> str:
    record = RunRecord(root, [], argv=["flowproof", "run", str(root)])
    record.started = T0 + timedelta(minutes=minute)
    record.results = list(results)
    path = record.write()
    assert path is not None
    return path.parent.name


def audit(root: Path, *args: str) -> CliResult:
    return run_cli("audit", root, *args)


def test_no_record_tells_the_user_to_run_first(tmp_path: Path) -> None:
    result = audit(tmp_path)
    assert result.code == 2, result.output
    assert NO_RECORD.format(runs=tmp_path / RUNS, root=tmp_path) in result.stderr
    assert "Traceback" not in result.output


def test_audit_never_loads_the_proxy_engine(tmp_path: Path) -> None:
    """Audit reads JSON: it must not pay for (or depend on) mitmproxy or the egress package."""
    recorded_run(tmp_path, 0, row("sec.egress", "pass"))
    probe = (
        "import sys\n"
        "from flowproof_cli.cli.main import exit_code\n"
        f"sys.argv = ['flowproof', 'audit', {str(tmp_path)!r}]\n"
        "print('EXIT', exit_code(), file=sys.stderr)\n"
        "heavy = ('mitmproxy', 'flowproof_cli.egress', 'flowproof_cli.runner.flow', 'pydantic')\n"
        "print('LOADED', [m for m in heavy if m in sys.modules], file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env=clean_environ(),
    )
    assert "EXIT 0" in done.stderr, done.stderr
    assert "LOADED []" in done.stderr


def test_audit_takes_a_directory(tmp_path: Path) -> None:
    spec = write_flow(tmp_path)
    result = audit(spec)
    assert result.code == 2
    assert "is a file" in result.stderr


def test_all_controls_pass(tmp_path: Path) -> None:
    run_id = recorded_run(tmp_path, 0, row("sec.egress", "pass"), row("sec.secret", "pass"))
    result = audit(tmp_path)
    assert result.code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"run {run_id}: flowproof run {tmp_path} (exit 0)"
    assert lines[1].startswith("flowproof ") and ", Python 3." in lines[1]
    header = next(line for line in lines if line.startswith("control "))
    assert header.split() == ["control", "verdict", "lanes", "containment", "when"]
    egress = next(line for line in lines if line.startswith("sec.egress "))
    assert egress.split()[:3] == ["sec.egress", "pass", "egress"]
    assert "enforced (linux seccomp)" in egress and egress.endswith("2026-12-01 12:00:00Z")
    assert "2 control(s): 2 pass, 0 fail, 0 capability-error" in lines
    assert lines[-1] == "OK: every control passed"


def test_a_failing_control_fails_the_audit(tmp_path: Path) -> None:
    recorded_run(
        tmp_path,
        0,
        row("sec.egress", "pass"),
        row("ops.reply", "fail", reason="assert: reply contains rainy (step at line 9)"),
    )
    result = audit(tmp_path)
    assert result.code == 1, result.output
    lines = result.stdout.splitlines()
    failing = lines.index(next(line for line in lines if line.startswith("ops.reply ")))
    assert lines[failing].split()[1] == "fail"
    assert lines[failing + 1] == "    why: assert: reply contains rainy (step at line 9)"
    assert lines[-1] == "FAIL: 1 control(s) failed or could not be certified"


def test_a_capability_error_fails_the_audit(tmp_path: Path) -> None:
    reason = "a url agent is a running service that flowproof did not start"
    recorded_run(
        tmp_path,
        0,
        row(
            "sec.egress",
            "capability-error",
            reason=f"assert_no_egress: cannot certify: {reason}",
            containment=f"not contained ({reason})",
        ),
    )
    result = audit(tmp_path)
    assert result.code == 1, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("sec.egress "))
    assert line.split()[1] == "capability-error"
    assert f"not contained ({reason})" in line
    assert f"    why: assert_no_egress: cannot certify: {reason}" in result.stdout
    assert "0 pass, 0 fail, 1 capability-error" in result.stdout


def test_json_is_the_same_audit_for_machines(tmp_path: Path) -> None:
    run_id = recorded_run(tmp_path, 0, row("sec.egress", "pass"), row("ops.reply", "fail"))
    result = audit(tmp_path, "--json")
    assert result.code == 1, result.output
    payload = json.loads(result.stdout)
    assert (payload["exit_code"], payload["passed"]) == (1, False)
    assert payload["run"]["id"] == run_id
    assert payload["run"]["argv"] == ["flowproof", "run", str(tmp_path)]
    assert payload["runs"] == [run_id]
    assert [(c["id"], c["verdict"]) for c in payload["controls"]] == [
        ("sec.egress", "pass"),
        ("ops.reply", "fail"),
    ]
    assert payload["since"] is None and payload["verify"] is None
    passing = tmp_path / "passing"
    passing.mkdir()
    recorded_run(passing, 0, row("sec.egress", "pass"))
    again = audit(passing, "--json")
    assert again.code == 0 and json.loads(again.stdout)["passed"] is True


def test_a_run_without_controls_says_so(tmp_path: Path) -> None:
    plain = FlowResult("plain", Path("p.flow.yaml"), "replay", Path("p.trace.yaml"))
    recorded_run(tmp_path, 0, plain)
    result = audit(tmp_path)
    assert result.code == 0, result.output
    assert "no control in this run. Fix: declare `control: {id: ...}` in a flow" in result.stdout


def test_run_picks_an_older_run_and_an_unknown_id_lists_the_ids(tmp_path: Path) -> None:
    first = recorded_run(tmp_path, 0, row("sec.egress", "fail"))
    second = recorded_run(tmp_path, 1, row("sec.egress", "pass"))
    assert audit(tmp_path).code == 0  # the latest run
    older = audit(tmp_path, "--run", first)
    assert older.code == 1, older.output
    assert older.stdout.startswith(f"run {first}:")
    unknown = audit(tmp_path, "--run", "20200101T000000.000Z-dead")
    assert unknown.code == 2
    assert (
        f"no run `20200101T000000.000Z-dead` in {tmp_path / RUNS}. Fix: use one of the runs "
        f"there (oldest first): {first}, {second}"
    ) in unknown.stderr
    assert audit(tmp_path, "--since", "nope").code == 2


@pytest.fixture
def history(tmp_path: Path) -> Callable[..., CliResult]:
    """`--since` between a first run (a and b pass, c fails) and a second run."""
    before = recorded_run(
        tmp_path, 0, row("sec.a", "pass"), row("sec.b", "pass"), row("sec.c", "fail")
    )

    def since(*after: FlowResult) -> CliResult:
        recorded_run(tmp_path, 1, *after)
        return audit(tmp_path, "--since", before)

    return since


def change_line(result: CliResult, control_id: str) -> list[str]:
    return next(
        line.split() for line in result.stdout.splitlines() if line.startswith(f"    {control_id} ")
    )


def test_since_unchanged_is_ok(history: Callable[..., CliResult]) -> None:
    result = history(row("sec.a", "pass"), row("sec.b", "pass"), row("sec.c", "fail"))
    assert result.code == 0, result.output
    assert change_line(result, "sec.a") == ["sec.a", "kept", "pass"]
    assert change_line(result, "sec.c") == ["sec.c", "kept", "fail"]  # no worse than before
    assert result.stdout.splitlines()[-1].startswith("OK: no control regressed or disappeared")
    assert "(3 kept)" in result.stdout


def test_since_a_regression_fails(history: Callable[..., CliResult]) -> None:
    result = history(row("sec.a", "capability-error"), row("sec.b", "fail"), row("sec.c", "fail"))
    assert result.code == 1, result.output
    assert change_line(result, "sec.a") == ["sec.a", "regressed", "pass", "->", "capability-error"]
    assert change_line(result, "sec.b") == ["sec.b", "regressed", "pass", "->", "fail"]
    assert result.stdout.splitlines()[-1].startswith("FAIL: 2 regressed since run ")


def test_since_a_removed_control_fails(history: Callable[..., CliResult]) -> None:
    result = history(row("sec.a", "pass"), row("sec.c", "fail"))
    assert result.code == 1, result.output
    assert change_line(result, "sec.b") == ["sec.b", "removed", "pass", "->", "(gone)"]
    assert result.stdout.splitlines()[-1].startswith("FAIL: 1 removed since run ")


def test_since_an_added_or_improved_control_is_ok(history: Callable[..., CliResult]) -> None:
    result = history(
        row("sec.a", "pass"), row("sec.b", "pass"), row("sec.c", "pass"), row("sec.d", "fail")
    )
    assert result.code == 0, result.output
    assert change_line(result, "sec.c") == ["sec.c", "improved", "fail", "->", "pass"]
    assert change_line(result, "sec.d") == ["sec.d", "added", "(new)", "fail"]
    assert "(2 kept, 1 improved, 1 added)" in result.stdout


def test_since_in_json(history: Callable[..., CliResult], tmp_path: Path) -> None:
    history(row("sec.a", "pass"))
    before = run_ids(tmp_path)[0]
    payload = json.loads(audit(tmp_path, "--since", before, "--json").stdout)
    assert payload["exit_code"] == 1
    assert payload["since"]["id"] == before
    assert {c["id"]: c["kind"] for c in payload["since"]["changes"]} == {
        "sec.a": "kept",
        "sec.b": "removed",
        "sec.c": "removed",
    }


def test_verify_with_nothing_judged(tmp_path: Path) -> None:
    recorded_run(tmp_path, 0, row("sec.a", "pass"))  # no sha256 recorded: nothing to verify
    result = audit(tmp_path, "--verify")
    assert result.code == 0, result.output
    assert "none (no flow of this run read or wrote a file)" in result.stdout


# -- spec-level checks of controls through `run` (fast: no flow runs) ----------------------


def control_flow(folder: Path, name: str, control_id: str, **extra: Any) -> Path:
    return write_flow(folder, name=name, control={"id": control_id}, **extra)


def test_duplicate_control_ids_stop_a_directory_run_before_any_flow(tmp_path: Path) -> None:
    first = control_flow(tmp_path, "a", "sec.same")
    (tmp_path / "sub").mkdir()
    second = control_flow(tmp_path / "sub", "b", "sec.same")
    result = run_cli("run", tmp_path)
    assert result.code == 2, result.output
    line = next(
        n + 1 for n, text in enumerate(second.read_text().splitlines()) if "id: sec.same" in text
    )
    first_line = next(
        n + 1 for n, text in enumerate(first.read_text().splitlines()) if "id: sec.same" in text
    )
    assert (
        f"error: {second}:{line}: control id `sec.same` is already declared by {first}:{first_line}"
    ) in result.stderr
    assert "Fix: give one of the two controls another id" in result.stderr
    assert result.stdout == ""  # no flow ran
    assert not (tmp_path / ".flowproof").exists()  # no record, no JUnit


def test_a_bad_control_id_is_a_spec_error_with_its_line(tmp_path: Path) -> None:
    spec = control_flow(tmp_path, "a", "Sec Egress")
    result = run_cli("run", spec)
    assert result.code == 2, result.output
    line = next(
        n + 1 for n, text in enumerate(spec.read_text().splitlines()) if "id: Sec Egress" in text
    )
    assert (
        f"error: {spec}:{line}: control id 'Sec Egress' may hold only lowercase letters, "
        "digits, `.`, `_` and `-`. Fix: write e.g. `id: sec-egress`"
    ) in result.stderr
    (run_id,) = run_ids(tmp_path)  # the run that could not start is recorded, as an error
    (flow,) = load_run(tmp_path, run_id)["flows"]
    assert (flow["status"], flow["control"]) == ("error", None)
    assert flow["message"].startswith(f"{spec}:{line}: control id 'Sec Egress'")


# -- real flows (slow) ------------------------------------------------------------------------


def upstream_env(fake: FakeUpstream) -> dict[str, str]:
    return {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "sk-k"}


@pytest.fixture(scope="module")
def recorded_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real recording, copied beside every flow that replays it."""
    folder = tmp_path_factory.mktemp("recording")
    spec = write_flow(folder)
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env=upstream_env(fake))
    assert result.code == 0, result.output
    return folder / "weather.trace.yaml"


def traced(folder: Path, trace: Path, name: str, **extra: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = write_flow(folder, name=name, **extra)
    shutil.copy(trace, folder / f"{name}.trace.yaml")
    return spec


def latest(root: Path) -> dict[str, Any]:
    ids = run_ids(root)
    assert ids, f"no run record under {root}"
    return load_run(root, ids[-1])


@pytest.mark.slow
def test_record_and_a_single_spec_run_write_beside_the_spec(tmp_path: Path) -> None:
    spec = write_flow(tmp_path, control={"id": "ops.weather", "title": "Weather"})
    trace = tmp_path / "weather.trace.yaml"
    with FakeUpstream() as fake:
        recorded = run_cli("record", spec, env=upstream_env(fake))
    assert recorded.code == 0, recorded.output
    document = latest(tmp_path)
    assert document["argv"] == ["flowproof", "record", str(spec)]
    (flow,) = document["flows"]
    assert (flow["mode"], flow["status"], flow["trace_written"]) == ("record", "pass", True)
    assert (flow["spec"], flow["trace"]) == ("weather.flow.yaml", "weather.trace.yaml")
    assert flow["spec_sha256"] == file_sha256(spec)
    assert flow["trace_sha256"] == file_sha256(trace)  # the trace it wrote
    assert (flow["model_calls"], flow["recorded_turns"], flow["agent_exit_code"]) == (2, 2, 0)
    assert "sunny" in flow["stdout_tail"]
    assert flow["control"]["id"] == "ops.weather" and flow["control"]["verdict"] == "pass"
    assert "sk-k" not in json.dumps(document)

    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output
    assert len(run_ids(tmp_path)) == 2
    (flow,) = latest(tmp_path)["flows"]
    assert (flow["mode"], flow["trace_sha256"]) == ("replay", file_sha256(trace))  # read
    assert flow["control"]["containment"] == (
        "not contained (the flow declares no allow_egress and no assert_no_egress)"
    )
    audited = audit(tmp_path)  # the spec's folder holds the single-spec records
    assert audited.code == 0, audited.output
    assert f"flowproof run {spec} (exit 0)" in audited.stdout


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_directory_run_writes_one_record_in_the_directory(
    tmp_path: Path, recorded_trace: Path, jobs: str
) -> None:
    root = tmp_path / "flows"
    traced(root, recorded_trace, "a", control={"id": "ops.a"})
    traced(root / "nested", recorded_trace, "b", control={"id": "ops.b"})
    write_flow(root, name="c_untraced", control={"id": "ops.c"})
    result = run_cli("run", root, "-j", jobs)
    assert result.code == 0, result.output
    assert len(run_ids(root)) == 1  # the parent's record only, never a worker's
    assert not (root / "nested" / ".flowproof").exists()
    document = latest(root)
    assert document["summary"] == {"pass": 2, "fail": 0, "skipped": 1, "error": 0}
    flows = {flow["spec"]: flow for flow in document["flows"]}
    assert set(flows) == {"a.flow.yaml", "nested/b.flow.yaml", "c_untraced.flow.yaml"}
    assert flows["nested/b.flow.yaml"]["trace_sha256"] == file_sha256(
        root / "nested" / "b.trace.yaml"
    )
    skipped = flows["c_untraced.flow.yaml"]
    assert (skipped["status"], skipped["trace_sha256"]) == ("skipped", None)
    assert skipped["control"]["verdict"] == "fail"  # a control that did not run is no evidence
    assert skipped["control"]["reason"].startswith("not run: skipped (no trace; record it:")
    audited = audit(root)
    assert audited.code == 1, audited.output
    assert "2 pass, 1 fail, 0 capability-error" in audited.stdout


@pytest.mark.slow
def test_a_regression_on_real_runs(tmp_path: Path, recorded_trace: Path) -> None:
    spec = traced(tmp_path, recorded_trace, "a", control={"id": "ops.reply"})
    traced(tmp_path, recorded_trace, "b", control={"id": "ops.other"})
    assert run_cli("run", tmp_path).code == 0
    (before,) = run_ids(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["steps"][-1] = {"assert": "reply contains rainy"}  # not part of matching
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    assert run_cli("run", tmp_path).code == 1
    result = audit(tmp_path)
    assert result.code == 1, result.output
    why = (
        '    why: assert reply contains rainy: the reply does not contain "rainy"; the reply was: '
    )
    assert why in result.stdout
    since = audit(tmp_path, "--since", before)
    assert since.code == 1, since.output
    assert change_line(since, "ops.reply") == ["ops.reply", "regressed", "pass", "->", "fail"]
    assert change_line(since, "ops.other") == ["ops.other", "kept", "pass"]


@pytest.mark.slow
def test_verify_names_an_edited_trace(tmp_path: Path, recorded_trace: Path) -> None:
    traced(tmp_path, recorded_trace, "a", control={"id": "ops.a"})
    assert run_cli("run", tmp_path).code == 0
    clean = audit(tmp_path, "--verify")
    assert clean.code == 0, clean.output
    assert "unchanged  a.trace.yaml  (trace of 'a flow')" in clean.stdout
    assert "unchanged  a.flow.yaml   (spec of 'a flow')" in clean.stdout
    trace = tmp_path / "a.trace.yaml"
    trace.write_text(trace.read_text() + "# edited after the run\n")
    edited = audit(tmp_path, "--verify")
    assert edited.code == 1, edited.output
    assert "changed    a.trace.yaml  (trace of 'a flow')" in edited.stdout
    assert "unchanged  a.flow.yaml   (spec of 'a flow')" in edited.stdout
    assert edited.stdout.splitlines()[-1] == "FAIL: 1 judged file(s) changed since the run"
    payload = json.loads(audit(tmp_path, "--verify", "--json").stdout)
    assert {(c["kind"], c["status"]) for c in payload["verify"]} == {
        ("spec", "unchanged"),
        ("trace", "changed"),
    }


@pytest.mark.slow
def test_an_unwritable_record_keeps_the_verdict_and_the_exit_code(
    tmp_path: Path, recorded_trace: Path
) -> None:
    passing = traced(tmp_path, recorded_trace, "a")
    failing = traced(tmp_path, recorded_trace, "b", env={"AGENT_MODEL": "gpt-4o"})
    (tmp_path / ".flowproof").write_text("a file where the record folder would go\n")
    warning = f"warning: could not write the run record under {tmp_path / RUNS}: Not a directory"
    ok = run_cli("run", passing)
    assert ok.code == 0, ok.output
    assert ok.stdout.startswith("PASS: a flow")
    assert ok.stderr.count("warning: could not write the run record") == 1
    assert warning in ok.stderr
    bad = run_cli("run", failing)
    assert bad.code == 1, bad.output
    assert bad.stdout.startswith("FAIL: b flow - divergence at turn 1: model changed")
    assert bad.stderr.count("warning: could not write the run record") == 1
    directory = run_cli("run", tmp_path, "-j", "2")
    assert directory.code == 1, directory.output
    assert "1 passed, 1 failed, 0 skipped" in directory.stdout
    assert directory.stderr.count("warning: could not write the run record") == 1
    assert (tmp_path / ".flowproof").is_file()


@pytest.mark.slow
def test_a_url_agent_with_assert_no_egress_is_a_capability_error(
    tmp_path: Path,
    start_service: Callable[..., Service],  # noqa: F811
) -> None:
    """Every other assertion passes: the control is still not a pass, and not a plain fail."""
    service = start_service(SERVICE_TOKEN="tok-audit")
    spec = write_url_flow(tmp_path, service, control={"id": "sec.egress.url"})
    data = yaml.safe_load(spec.read_text())
    data["steps"].append("assert_no_egress")
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    with FakeUpstream() as fake:
        result = run_cli(
            "record",
            spec,
            env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "SVC_TOKEN": "tok-audit"},
        )
    assert result.code == 1, result.output
    reason = "a url agent is a running service that flowproof did not start"
    assert f"assert_no_egress: cannot certify: {reason}" in result.stdout
    (flow,) = latest(tmp_path)["flows"]
    control = flow["control"]
    assert (control["verdict"], control["lanes"]) == ("capability-error", ["egress"])
    assert control["containment"] == f"not contained ({reason})"
    assert "blocked" not in control["evidence"]  # this run was not contained
    audited = audit(tmp_path)
    assert audited.code == 1, audited.output
    assert "capability-error" in next(
        line for line in audited.stdout.splitlines() if line.startswith("sec.egress.url ")
    )


def _no_netns() -> str | None:
    if sys.platform != "linux":
        return "egress containment is Linux-only"
    from flowproof_cli.egress import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        return f"containment unavailable here: {reason}"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "`unshare` or `ip` is missing"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return None if probe.returncode == 0 else "cannot create a network namespace here"


@pytest.mark.slow
def test_a_contained_replay_records_this_runs_blocked_list(
    tmp_path: Path, recorded_trace: Path
) -> None:
    """Replayed contained, in a network namespace of its own with only loopback up."""
    problem = _no_netns()
    if problem is not None:
        pytest.skip(problem)
    spec = traced(tmp_path, recorded_trace, "a", control={"id": "sec.egress.declared"})
    data = yaml.safe_load(spec.read_text())
    data["agent"]["allow_egress"] = []
    data["steps"].append("assert_no_egress")
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    command = f'ip link set lo up && exec "{sys.executable}" -m flowproof_cli run "{spec}"'
    completed = subprocess.run(
        ["unshare", "-n", "sh", "-c", command],
        env=clean_environ(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (flow,) = latest(tmp_path)["flows"]
    control = flow["control"]
    assert control["verdict"] == "pass"
    assert control["lanes"] == ["egress"]
    assert control["containment"] == "enforced (linux seccomp)"
    assert control["evidence"] == {"trace": "a.trace.yaml", "blocked": []}
    assert os.path.exists(tmp_path / "a.trace.yaml")
