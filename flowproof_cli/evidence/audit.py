"""What the run records say: the controls of one run, a comparison of two, and a check of
the files each verdict judged against the working tree.

It reads records only. It never replays and never imports the proxy engine, so an audit in
CI costs a JSON read, and its answer is about runs that happened, not a run it made up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flowproof_cli.errors import ExitCode, FlowproofError
from flowproof_cli.evidence.records import file_sha256, load_run, run_ids, runs_dir

#: What can happen to a control between two runs, and the changes that fail `--since`.
CHANGE_KINDS = ("kept", "improved", "changed", "added", "regressed", "removed")
BAD_CHANGES = ("regressed", "removed")


@dataclass(frozen=True)
class Run:
    id: str
    document: dict[str, Any]

    @property
    def started_at(self) -> str:
        return str(self.document.get("started_at") or "")

    @property
    def controls(self) -> list[dict[str, Any]]:
        """Each control row of the run, in the order its flows ran."""
        return [
            flow["control"]
            for flow in self.document["flows"]
            if isinstance(flow, dict) and isinstance(flow.get("control"), dict)
        ]


@dataclass(frozen=True)
class Change:
    """One control between two runs: kept, improved, regressed, changed (between two
    non-passing verdicts), added or removed."""

    id: str
    kind: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class FileCheck:
    """A file a verdict judged, against the working tree: unchanged, changed or missing."""

    flow: str
    kind: str  # "spec" or "trace"
    path: str
    status: str


def change_kind(before: str | None, after: str | None) -> str:
    if before is None:
        return "added"
    if after is None:
        return "removed"
    if before == after:
        return "kept"
    if after == "pass":
        return "improved"
    if before == "pass":
        return "regressed"
    return "changed"


def compare(before: Run, after: Run) -> list[Change]:
    """Every control of either run, by id: the later run's order, then removed ones."""
    old = {row["id"]: row["verdict"] for row in before.controls}
    new = {row["id"]: row["verdict"] for row in after.controls}
    ids = list(new) + [control_id for control_id in old if control_id not in new]
    return [
        Change(
            control_id,
            change_kind(old.get(control_id), new.get(control_id)),
            old.get(control_id),
            new.get(control_id),
        )
        for control_id in ids
    ]


def verify(root: Path, run: Run) -> list[FileCheck]:
    """Recompute the sha256 of every spec and trace the run's verdicts judged."""
    checks: list[FileCheck] = []
    for flow in run.document["flows"]:
        for kind in ("spec", "trace"):
            recorded = flow.get(f"{kind}_sha256")
            where = flow.get(kind)
            if not recorded or not where:
                continue  # nothing was judged: a skipped flow read no trace
            now = file_sha256(root / where)
            status = "missing" if now is None else "unchanged" if now == recorded else "changed"
            checks.append(FileCheck(str(flow.get("name")), kind, str(where), status))
    return checks


@dataclass
class Audit:
    root: Path
    ids: list[str]  # every complete record under root, oldest first
    run: Run
    since: Run | None = None
    changes: list[Change] | None = None
    checks: list[FileCheck] | None = None

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [row for row in self.run.controls if row.get("verdict") != "pass"]

    @property
    def bad_changes(self) -> list[Change]:
        return [change for change in self.changes or [] if change.kind in BAD_CHANGES]

    @property
    def changed_files(self) -> list[FileCheck]:
        return [check for check in self.checks or [] if check.status != "unchanged"]

    @property
    def exit_code(self) -> ExitCode:
        """With `--since`, the comparison decides; without it, the run's verdicts do;
        `--verify` adds that nothing judged has changed."""
        bad = bool(self.bad_changes) if self.changes is not None else bool(self.failing)
        return ExitCode.FAILED if bad or self.changed_files else ExitCode.PASSED

    def to_json(self) -> dict[str, Any]:
        document = self.run.document
        return {
            "exit_code": int(self.exit_code),
            "passed": self.exit_code == ExitCode.PASSED,
            "run": {
                key: document.get(key)
                for key in ("id", "started_at", "finished_at", "argv", "exit_code", "flowproof")
            }
            | {"os": document.get("os"), "python": document.get("python")},
            "runs": self.ids,
            "controls": self.run.controls,
            "since": None
            if self.since is None
            else {"id": self.since.id, "changes": [asdict(c) for c in self.changes or []]},
            "verify": None if self.checks is None else [asdict(c) for c in self.checks],
        }


def audit(
    root: Path, *, run_id: str | None = None, since_id: str | None = None, check: bool = False
) -> Audit:
    """The audit of the latest run under root (or `run_id`); FlowproofError (exit 2) when
    there is no record, or no record by that id."""
    ids = run_ids(root)
    if not ids:
        raise FlowproofError(
            f"no run record in {runs_dir(root)}. Fix: run the flows first: `flowproof run "
            f"{root}` (every `flowproof run` and `flowproof record` writes one, in the "
            "directory it ran or beside the spec)"
        )
    run = _open(root, ids, run_id or ids[-1])
    result = Audit(root, ids, run)
    if since_id is not None:
        result.since = _open(root, ids, since_id)
        result.changes = compare(result.since, run)
    if check:
        result.checks = verify(root, run)
    return result


def _open(root: Path, ids: list[str], run_id: str) -> Run:
    if run_id not in ids:
        raise FlowproofError(
            f"no run `{run_id}` in {runs_dir(root)}. Fix: use one of the runs there "
            f"(oldest first): {', '.join(ids)}"
        )
    return Run(run_id, load_run(root, run_id))
