"""Run records: ids that sort by time, what a record holds, retention, and a record that
cannot be written (a warning, once; never another verdict)."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowproof_cli.cassette import Mode
from flowproof_cli.errors import FlowproofError, TraceError
from flowproof_cli.evidence import records
from flowproof_cli.evidence.records import (
    KEEP,
    RUN_ID,
    RunRecord,
    file_sha256,
    load_run,
    new_run_id,
    run_ids,
)
from flowproof_cli.runner.job import FlowJob
from flowproof_cli.runner.suite import Hooks
from flowproof_cli.verdict import Failure, FlowResult

T0 = datetime(2026, 12, 1, 12, 10, 30, 123456, tzinfo=UTC)
CONTROLLED = """\
name: controlled
app: agent
agent:
  command: python agent.py
control:
  id: sec.controlled
  title: Controlled
steps:
  - prompt: hi
"""


def result(root: Path, name: str = "a", **fields) -> FlowResult:
    row = FlowResult(
        f"{name} flow", root / f"{name}.flow.yaml", "replay", root / f"{name}.trace.yaml"
    )
    for key, value in fields.items():
        setattr(row, key, value)
    return row


def job(root: Path, name: str = "a") -> FlowJob:
    return FlowJob(
        spec_path=root / f"{name}.flow.yaml",
        trace_path=root / f"{name}.trace.yaml",
        mode=Mode.REPLAY,
        environ={},
        hooks=Hooks(),
    )


def written(root: Path) -> list[dict]:
    return [load_run(root, run_id) for run_id in run_ids(root)]


# -- ids ---------------------------------------------------------------------------------


def test_an_id_is_the_utc_start_to_the_millisecond_then_a_suffix() -> None:
    run_id = new_run_id(T0)
    assert RUN_ID.fullmatch(run_id)
    assert run_id.startswith("20261201T121030.123Z-")
    later = new_run_id(T0 + timedelta(milliseconds=1))
    much_later = new_run_id(T0 + timedelta(days=40))
    assert sorted([much_later, later, run_id]) == [run_id, later, much_later]


def test_two_runs_in_the_same_millisecond_get_two_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffixes = iter(["aaaa", "aaaa", "bbbb"])  # the second run's first pick is taken
    monkeypatch.setattr(records.secrets, "token_hex", lambda _: next(suffixes))
    for _ in range(2):
        record = RunRecord(tmp_path, [])
        record.started = T0
        record.results = [result(tmp_path)]
        assert record.write() is not None
    assert run_ids(tmp_path) == ["20261201T121030.123Z-aaaa", "20261201T121030.123Z-bbbb"]


# -- contents ------------------------------------------------------------------------------


def test_the_record_holds_the_run_and_each_flow(tmp_path: Path) -> None:
    spec = tmp_path / "a.flow.yaml"
    spec.write_text("name: a\n")
    record = RunRecord(tmp_path, [job(tmp_path)], argv=["flowproof", "run", str(tmp_path)])
    record.results = [
        result(
            tmp_path,
            failures=[
                Failure("divergence at turn 1: model changed"),
                Failure("assert_no_egress: cannot certify: not contained", line=9),
            ],
            duration_s=1.23456,
            model_calls=1,
            recorded_turns=2,
            mcp_calls={"notes": 3},
            agent_exit_code=1,
            stdout_tail="out",
            stderr_tail="err",
            match_rules=[{"rule": "ignore metadata.user_id", "origin": "spec", "turns": 2}],
            containment="egress containment: enforced (linux seccomp)",
            spec_sha256=file_sha256(spec),
            trace_sha256="ab" * 32,
            control={"id": "sec.a", "verdict": "fail", "evidence": {"trace": "/elsewhere"}},
        )
    ]
    path = record.write(1)
    assert path is not None and path.name == "report.json"
    document = json.loads(path.read_text())
    assert document["id"] == path.parent.name and RUN_ID.fullmatch(document["id"])
    assert document["format"] == 1
    assert document["argv"] == ["flowproof", "run", str(tmp_path)]
    assert document["exit_code"] == 1
    assert document["flowproof"] == records._version() != "unknown"
    assert document["os"]["system"] == os.uname().sysname
    assert document["python"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
    assert document["started_at"].endswith("Z") and document["finished_at"].endswith("Z")
    assert document["summary"] == {"pass": 0, "fail": 1, "skipped": 0, "error": 0}
    (flow,) = document["flows"]
    assert flow == {
        "name": "a flow",
        "spec": "a.flow.yaml",  # relative to the record's root
        "mode": "replay",
        "status": "fail",
        "duration_s": 1.235,
        "message": "divergence at turn 1: model changed\n"
        "assert_no_egress: cannot certify: not contained (step at line 9)",
        "failures": [
            {"message": "divergence at turn 1: model changed", "line": None, "turn": None},
            {
                "message": "assert_no_egress: cannot certify: not contained",
                "line": 9,
                "turn": None,
            },
        ],
        "agent_exit_code": 1,
        "stdout_tail": "out",
        "stderr_tail": "err",
        "model_calls": 1,
        "recorded_turns": 2,
        "mcp_calls": {"notes": 3},
        "match_rules": [{"rule": "ignore metadata.user_id", "origin": "spec", "turns": 2}],
        "containment": "egress containment: enforced (linux seccomp)",
        "spec_sha256": file_sha256(spec),
        "trace": "a.trace.yaml",
        "trace_sha256": "ab" * 32,
        "trace_written": False,
        "control": {"id": "sec.a", "verdict": "fail", "evidence": {"trace": "a.trace.yaml"}},
    }


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        ({}, "pass", None),
        ({"failures": [Failure("x")]}, "fail", "x"),
        ({"skipped": "not set: K (skip_unless_env)"}, "skipped", "not set: K (skip_unless_env)"),
        ({"error": "before_each failed"}, "error", "before_each failed"),
    ],
)
def test_each_status(tmp_path: Path, fields: dict, status: str, message: str | None) -> None:
    record = RunRecord(tmp_path, [])
    record.results = [result(tmp_path, **fields)]
    record.write()
    (document,) = written(tmp_path)
    assert (document["flows"][0]["status"], document["flows"][0]["message"]) == (status, message)
    assert document["exit_code"] == {"pass": 0, "skipped": 0, "fail": 1, "error": 2}[status]


def test_a_path_outside_the_root_is_relative_too(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    record = RunRecord(root, [])
    record.results = [result(root, trace_path=tmp_path / "traces" / "a.trace.yaml")]
    record.write()
    assert written(root)[0]["flows"][0]["trace"] == "../traces/a.trace.yaml"


def test_no_environment_value_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWPROOF_AGENT_KEY", "sk-never-in-a-record-4242")
    record = RunRecord(tmp_path, [])
    record.results = [result(tmp_path)]
    path = record.write()
    assert path is not None
    assert "sk-never-in-a-record-4242" not in path.read_text()
    assert "environ" not in path.read_text()


# -- one record per invocation, however it ends -------------------------------------------


def test_sys_exit_writes_with_its_code(tmp_path: Path) -> None:
    with pytest.raises(SystemExit), RunRecord(tmp_path, [job(tmp_path)]) as record:
        record.results = [result(tmp_path)]
        sys.exit(1)
    (document,) = written(tmp_path)
    assert document["exit_code"] == 1


def test_an_error_that_stops_a_single_spec_is_recorded_as_its_row(tmp_path: Path) -> None:
    with pytest.raises(TraceError), RunRecord(tmp_path, [job(tmp_path)]):
        raise TraceError("no trace at a.trace.yaml; record it first: flowproof record a")
    (document,) = written(tmp_path)
    assert document["exit_code"] == 2
    (flow,) = document["flows"]
    assert (flow["name"], flow["status"]) == ("a.flow.yaml", "error")
    assert flow["message"] == "no trace at a.trace.yaml; record it first: flowproof record a"


def test_a_control_whose_spec_never_loaded_stays_in_the_record(tmp_path: Path) -> None:
    (tmp_path / "a.flow.yaml").write_text(CONTROLLED + "stpes: []\n")
    with pytest.raises(FlowproofError), RunRecord(tmp_path, [job(tmp_path)]):
        raise FlowproofError("a.flow.yaml:10: unknown key `stpes`")
    (flow,) = written(tmp_path)[0]["flows"]
    assert flow["control"]["id"] == "sec.controlled"
    assert flow["control"]["verdict"] == "fail"
    assert flow["control"]["reason"] == "error: a.flow.yaml:10: unknown key `stpes`"
    assert flow["spec_sha256"] == file_sha256(tmp_path / "a.flow.yaml")


def test_an_interrupt_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), RunRecord(tmp_path, [job(tmp_path)]) as record:
        record.results = [result(tmp_path)]
        raise KeyboardInterrupt
    assert not (tmp_path / ".flowproof").exists()


def test_the_folder_holds_a_gitignore_of_everything(tmp_path: Path) -> None:
    """As pytest's cache does: git never lists `.flowproof/`, so a coding CLI's git status
    never carries it into a request."""
    RunRecord(tmp_path, []).write()
    ignore = tmp_path / ".flowproof" / ".gitignore"
    assert ignore.read_text() == records.GITIGNORE
    assert records.GITIGNORE.splitlines()[-1] == "*"
    ignore.unlink()  # a folder an older flowproof made: it gets one on the next write
    RunRecord(tmp_path, []).write()
    assert ignore.read_text() == records.GITIGNORE
    ignore.write_text("runs/\n")  # one of the user's own is left as it is
    RunRecord(tmp_path, []).write()
    assert ignore.read_text() == "runs/\n"
    assert sorted(entry.name for entry in (tmp_path / ".flowproof").iterdir()) == [
        ".gitignore",
        "runs",
    ]


# -- retention -----------------------------------------------------------------------------


def test_the_newest_ten_are_kept(tmp_path: Path) -> None:
    made = []
    for minute in range(KEEP + 2):
        record = RunRecord(tmp_path, [])
        record.started = T0 + timedelta(minutes=minute)
        record.results = [result(tmp_path)]
        path = record.write()
        assert path is not None
        made.append(path.parent.name)
    assert KEEP == 10
    assert run_ids(tmp_path) == made[2:]
    assert not (tmp_path / ".flowproof" / "runs" / made[0]).exists()


def test_retention_never_removes_what_is_not_a_record(tmp_path: Path) -> None:
    runs = tmp_path / ".flowproof" / "runs"
    runs.mkdir(parents=True)
    (runs / "notes.txt").write_text("mine")
    (runs / "keep-me").mkdir()
    for minute in range(KEEP + 1):
        record = RunRecord(tmp_path, [])
        record.started = T0 + timedelta(minutes=minute)
        record.write()
    assert len(run_ids(tmp_path)) == KEEP
    assert (runs / "notes.txt").read_text() == "mine" and (runs / "keep-me").is_dir()


def test_the_record_just_written_survives_a_clock_that_went_back(tmp_path: Path) -> None:
    for minute in range(KEEP):
        record = RunRecord(tmp_path, [])
        record.started = T0 + timedelta(minutes=minute)
        record.write()
    record = RunRecord(tmp_path, [])
    record.started = T0 - timedelta(days=1)  # older than every record there
    path = record.write()
    assert path is not None and path.is_file()


# -- a record that cannot be written --------------------------------------------------------


def test_an_unwritable_record_warns_once_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".flowproof").write_text("a file where the record folder would go")
    with pytest.raises(SystemExit) as stopped, RunRecord(tmp_path, []) as record:
        record.results = [result(tmp_path, failures=[Failure("x")])]
        sys.exit(1)
    assert stopped.value.code == 1  # the exit code is the run's
    assert record.path is None
    stderr = capsys.readouterr().err
    assert stderr.count("warning: could not write the run record") == 1
    assert f"warning: could not write the run record under {tmp_path}/.flowproof/runs: " in stderr
    assert "Not a directory" in stderr


def test_reading_a_broken_or_foreign_record_is_an_error(tmp_path: Path) -> None:
    record = RunRecord(tmp_path, [])
    path = record.write()
    assert path is not None
    run_id = path.parent.name
    path.write_text("{not json")
    with pytest.raises(FlowproofError, match=f"cannot read the run record .*{run_id}"):
        load_run(tmp_path, run_id)
    path.write_text(json.dumps({"format": 99, "flows": []}))
    with pytest.raises(FlowproofError, match="has format 99; this flowproof reads format 1"):
        load_run(tmp_path, run_id)
    path.write_text("[]")
    with pytest.raises(FlowproofError, match="is not a flowproof run record"):
        load_run(tmp_path, run_id)


# -- the job and result JSON -----------------------------------------------------------------


def test_flow_result_round_trips_with_its_evidence(tmp_path: Path) -> None:
    row = result(
        tmp_path,
        spec_sha256="a" * 64,
        trace_sha256="b" * 64,
        capability_error="egress containment is Linux-only; this platform is not contained",
        egress_blocked=[{"destination": "10.0.0.1:80", "protocol": "tcp", "at_ms": 3}],
        control={"id": "sec.a", "verdict": "capability-error"},
    )
    back = FlowResult.from_json(json.loads(json.dumps(row.to_json())))
    assert back == row
    assert (
        FlowResult.from_json(json.loads(json.dumps(result(tmp_path).to_json()))).egress_blocked
        is None
    )


def test_a_record_written_before_failures_were_data_is_still_audited(tmp_path: Path) -> None:
    """A record holds each failure as `{message, line, turn}`; an older one has only the
    joined `message`, and `flowproof audit` reads it as before."""
    from flowproof_cli.evidence.audit import audit

    spec = tmp_path / "a.flow.yaml"
    spec.write_text("name: a\n")
    record = RunRecord(tmp_path, [job(tmp_path)])
    control = {"id": "sec.a", "verdict": "fail", "reason": "x (step at line 9)"}
    record.results = [result(tmp_path, failures=[Failure("x", line=9)], control=control)]
    path = record.write(1)
    assert path is not None
    document = json.loads(path.read_text())
    assert document["flows"][0]["failures"] == [{"message": "x", "line": 9, "turn": None}]
    del document["flows"][0]["failures"]  # as a record of an older flowproof holds it
    path.write_text(json.dumps(document))
    (row,) = audit(tmp_path).failing
    assert row["id"] == "sec.a" and row["reason"] == "x (step at line 9)"
