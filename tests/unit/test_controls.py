"""Controls: the `control:` key, the control row of each verdict, unique ids, and the
comparison and file check `flowproof audit` makes from run records."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.evidence.audit import Run, change_kind, compare, verify
from flowproof_cli.evidence.controls import (
    DeclaredControl,
    check_unique_ids,
    control_row,
    declared_control,
    lanes,
    unloaded_row,
)
from flowproof_cli.spec import parse_spec
from flowproof_cli.verdict import Failure, FlowResult

SPEC = """\
name: egress control
app: agent
agent:
  command: python agent.py
  allow_egress: []
control:
  id: sec.egress.declared
  title: The agent reaches nothing undeclared
  description: Contained at record and replay.
steps:
  - prompt: Book me a flight
  - assert_no_egress
"""
ENFORCED = "egress containment: enforced (linux seccomp)"
URL_REASON = "a url agent is a running service that flowproof did not start"


def spec_of(text: str = SPEC):
    return parse_spec(text, "c.flow.yaml")


def result(**fields) -> FlowResult:
    row = FlowResult("egress control", Path("c.flow.yaml"), "replay", Path("c.trace.yaml"))
    for key, value in fields.items():
        setattr(row, key, value)
    return row


def error(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "c.flow.yaml")
    return caught.value


# -- the `control:` key ----------------------------------------------------------------------


def test_control_key_loads() -> None:
    control = spec_of().control
    assert control is not None
    assert (control.id, control.title) == (
        "sec.egress.declared",
        "The agent reaches nothing undeclared",
    )
    assert control.description == "Contained at record and replay."
    assert (
        spec_of(SPEC.replace("  title: The agent reaches nothing undeclared\n", "")).control.title
        is None
    )
    plain = SPEC.split("control:", maxsplit=1)[0] + "steps:\n  - prompt: hi\n"
    assert spec_of(plain).control is None


@pytest.mark.parametrize("bad", ["Sec.Egress", "sec egress", "sec/egress", "''", "sécu"])
def test_a_bad_control_id_names_its_line_and_the_fix(bad: str) -> None:
    problem = error(SPEC.replace("id: sec.egress.declared", f"id: {bad}"))
    assert problem.path == "c.flow.yaml"
    assert problem.line == 7  # the `id:` line
    assert "may hold only lowercase letters, digits, `.`, `_` and `-`" in str(problem)
    assert "Fix: write e.g. `id: " in str(problem)
    assert str(problem).startswith("c.flow.yaml:7: control id ")


def test_a_suggested_id_is_itself_valid() -> None:
    problem = error(SPEC.replace("id: sec.egress.declared", "id: Sec Egress/Declared"))
    assert "Fix: write e.g. `id: sec-egress-declared`" in str(problem)


def test_control_shape_errors_name_their_line() -> None:
    missing = error(SPEC.replace("  id: sec.egress.declared\n", ""))
    assert "missing required key `id` in `control`" in str(missing)
    unknown = error(SPEC.replace("  title:", "  titel:"))
    assert unknown.line == 8 and "unknown key `titel` in `control`" in str(unknown)
    assert "Did you mean `title`?" in str(unknown)
    number = error(SPEC.replace("id: sec.egress.declared", "id: 42"))
    assert number.line == 7 and "`control.id` must be non-empty text" in str(number)
    block = SPEC[SPEC.index("control:") : SPEC.index("steps:")]
    scalar = error(SPEC.replace(block, "control: sec.egress\n"))
    assert "`control` must be a mapping" in str(scalar)


# -- the row ---------------------------------------------------------------------------------


def test_lanes_say_what_the_flow_asserted() -> None:
    assert lanes(spec_of()) == ["egress"]
    both = SPEC.replace(
        "  - assert_no_egress\n", "  - assert_no_egress\n  - assert_no_secret_leak: ${K}\n"
    )
    assert lanes(spec_of(both)) == ["egress", "secret_leak"]
    secret = SPEC.replace("  - assert_no_egress\n", '  - assert_no_secret_leak: ["${K}", "${L}"]\n')
    assert lanes(spec_of(secret)) == ["secret_leak"]
    assert lanes(spec_of(SPEC.replace("  - assert_no_egress\n", ""))) == []


def test_a_contained_pass_carries_this_runs_blocked_list() -> None:
    row = control_row(spec_of(), result(containment=ENFORCED, egress_blocked=[]))
    assert row == {
        "id": "sec.egress.declared",
        "title": "The agent reaches nothing undeclared",
        "description": "Contained at record and replay.",
        "verdict": "pass",
        "reason": None,
        "lanes": ["egress"],
        "containment": "enforced (linux seccomp)",
        "evidence": {"trace": "c.trace.yaml", "blocked": []},
    }


def test_a_contained_failure_lists_what_this_run_blocked() -> None:
    blocked = [{"destination": "10.77.0.2:8080", "protocol": "tcp", "at_ms": 12}]
    failure = "assert_no_egress: the agent attempted 1 undeclared destination(s): tcp ..."
    row = control_row(
        spec_of(), result(containment=ENFORCED, egress_blocked=blocked, failures=[Failure(failure)])
    )
    assert row is not None
    assert (row["verdict"], row["reason"]) == ("fail", failure)
    assert row["evidence"]["blocked"] == blocked


def test_an_uncontained_run_never_shows_blocked_destinations() -> None:
    """Not contained: `blocked` is absent (not empty), whatever a trace recorded elsewhere
    holds; the row reads this run's result only."""
    row = control_row(
        spec_of(),
        result(
            containment=f"egress containment: not contained ({URL_REASON})",
            capability_error=URL_REASON,
            failures=[Failure(f"assert_no_egress: cannot certify: {URL_REASON}", line=11)],
        ),
    )
    assert row is not None
    assert "blocked" not in row["evidence"]
    assert row["verdict"] == "capability-error"
    assert row["reason"] == f"assert_no_egress: cannot certify: {URL_REASON}"
    assert row["containment"] == f"not contained ({URL_REASON})"


def test_capability_error_outranks_other_failures() -> None:
    row = control_row(
        spec_of(),
        result(capability_error="Linux-only", failures=[Failure("divergence at turn 1: x")]),
    )
    assert row is not None and row["verdict"] == "capability-error"


def test_a_failure_gives_its_first_line() -> None:
    row = control_row(
        spec_of(),
        result(failures=[Failure("divergence at turn 1: model\n  more"), Failure("also")]),
    )
    assert row is not None
    assert (row["verdict"], row["reason"]) == ("fail", "divergence at turn 1: model")


def test_a_flow_that_did_not_run_is_not_evidence() -> None:
    skipped = control_row(spec_of(), result(skipped="no trace; record it: flowproof record x"))
    assert skipped is not None
    assert skipped["verdict"] == "fail"
    assert skipped["reason"] == "not run: skipped (no trace; record it: flowproof record x)"
    assert skipped["containment"] is None and "blocked" not in skipped["evidence"]
    errored = control_row(spec_of(), result(error="before_each failed\nexit 3"))
    assert errored is not None
    assert (errored["verdict"], errored["reason"]) == ("fail", "error: before_each failed")


def test_a_flow_without_control_has_no_row() -> None:
    plain = SPEC.split("control:", maxsplit=1)[0] + "steps:\n  - prompt: hi\n"
    assert control_row(spec_of(plain), result()) is None


def test_an_unloaded_spec_keeps_its_control_as_a_failure(tmp_path: Path) -> None:
    declared = DeclaredControl("sec.x", "X", tmp_path / "x.flow.yaml", 3)
    row = unloaded_row(declared, result(error="x.flow.yaml:9: unknown key"))
    assert (row["id"], row["title"], row["verdict"]) == ("sec.x", "X", "fail")
    assert row["reason"] == "error: x.flow.yaml:9: unknown key"


# -- ids, read before any flow runs ----------------------------------------------------------


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_declared_control_reads_the_id_and_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a.flow.yaml", SPEC)
    assert declared_control(path) == DeclaredControl(
        "sec.egress.declared", "The agent reaches nothing undeclared", path, 7
    )
    untitled = write(
        tmp_path,
        "b.flow.yaml",
        SPEC.replace("  title: The agent reaches nothing undeclared\n", "  title: null\n"),
    )
    assert declared_control(untitled).title is None  # type: ignore[union-attr]
    for text in ("name: [unclosed\n", "control: sec.x\n", "control:\n  id: Bad Id\n", "- a\n"):
        assert declared_control(write(tmp_path, "c.flow.yaml", text)) is None
    assert declared_control(tmp_path / "missing.flow.yaml") is None


def test_duplicate_control_ids_name_both_files_and_the_line(tmp_path: Path) -> None:
    first = write(tmp_path, "a.flow.yaml", SPEC)
    other = write(tmp_path, "b.flow.yaml", SPEC.replace("id: sec.egress.declared", "id: sec.other"))
    second = write(tmp_path, "c.flow.yaml", "# the same control\n" + SPEC)
    with pytest.raises(SpecError) as caught:
        check_unique_ids([first, other, second])
    message = str(caught.value)
    assert message.startswith(
        f"{second}:8: control id `sec.egress.declared` is already declared by {first}:7"
    )
    assert "Fix: give one of the two controls another id" in message
    assert caught.value.exit_code == 2


def test_unique_ids_pass_and_broken_specs_are_left_to_their_own_load(tmp_path: Path) -> None:
    first = write(tmp_path, "a.flow.yaml", SPEC)
    other = write(tmp_path, "b.flow.yaml", SPEC.replace("id: sec.egress.declared", "id: sec.other"))
    broken = write(tmp_path, "c.flow.yaml", "name: [unclosed\n")
    found = check_unique_ids([first, other, broken])
    assert {path.name: declared.id for path, declared in found.items()} == {
        "a.flow.yaml": "sec.egress.declared",
        "b.flow.yaml": "sec.other",
    }


# -- comparing two runs, checking the judged files -----------------------------------------


def run_of(run_id: str, verdicts: dict[str, str], flows: list[dict] | None = None) -> Run:
    rows = [{"control": {"id": key, "verdict": value}} for key, value in verdicts.items()]
    return Run(run_id, {"flows": rows + (flows or [])})


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("pass", "pass", "kept"),
        ("fail", "fail", "kept"),
        ("fail", "pass", "improved"),
        ("capability-error", "pass", "improved"),
        ("pass", "fail", "regressed"),
        ("pass", "capability-error", "regressed"),
        ("fail", "capability-error", "changed"),
        (None, "fail", "added"),
        ("pass", None, "removed"),
    ],
)
def test_change_kinds(before: str | None, after: str | None, kind: str) -> None:
    assert change_kind(before, after) == kind


def test_compare_lists_the_later_runs_controls_then_the_removed_ones() -> None:
    before = run_of("a", {"x": "pass", "gone": "pass", "y": "fail"})
    after = run_of("b", {"y": "pass", "new": "fail", "x": "capability-error"})
    assert [(c.id, c.kind, c.before, c.after) for c in compare(before, after)] == [
        ("y", "improved", "fail", "pass"),
        ("new", "added", None, "fail"),
        ("x", "regressed", "pass", "capability-error"),
        ("gone", "removed", "pass", None),
    ]


def test_verify_recomputes_each_judged_file(tmp_path: Path) -> None:
    from flowproof_cli.evidence.records import file_sha256

    spec = write(tmp_path, "a.flow.yaml", SPEC)
    trace = write(tmp_path, "a.trace.yaml", "version: 1\n")
    gone = write(tmp_path, "b.trace.yaml", "version: 1\n")
    flows = [
        {
            "name": "a",
            "spec": "a.flow.yaml",
            "spec_sha256": file_sha256(spec),
            "trace": "a.trace.yaml",
            "trace_sha256": file_sha256(trace),
        },
        {
            "name": "b",
            "spec": "a.flow.yaml",
            "spec_sha256": file_sha256(spec),
            "trace": "b.trace.yaml",
            "trace_sha256": file_sha256(gone),
        },
        {
            "name": "skipped",
            "spec": "a.flow.yaml",
            "spec_sha256": None,
            "trace": "c.trace.yaml",
            "trace_sha256": None,
        },
    ]
    run = run_of("r", {}, flows)
    assert {c.status for c in verify(tmp_path, run)} == {"unchanged"}
    trace.write_text("version: 1\n# edited\n")
    gone.unlink()
    checks = [(c.flow, c.kind, c.path, c.status) for c in verify(tmp_path, run)]
    assert checks == [
        ("a", "spec", "a.flow.yaml", "unchanged"),
        ("a", "trace", "a.trace.yaml", "changed"),
        ("b", "spec", "a.flow.yaml", "unchanged"),
        ("b", "trace", "b.trace.yaml", "missing"),
    ]
