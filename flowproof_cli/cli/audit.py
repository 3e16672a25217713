"""`flowproof audit DIR`: the controls of the run records under DIR, for a reviewer or CI.

Reads `DIR/.flowproof/runs/*/report.json` only: it never replays. Exit 0 when every control
of the run passed, 1 when one failed or could not be certified; with `--since ID`, 1 when a
control regressed or disappeared since run ID; `--verify` also fails when a file a verdict
judged has changed since. Exit 2 when there is no record, or no record by that id. It prints
its own report: an audit is not a flow result (`cli/output.py`).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flowproof_cli.cli.options import json_option

if TYPE_CHECKING:
    from flowproof_cli.evidence.audit import Audit, Change, FileCheck

_HEADINGS = ("control", "verdict", "lanes", "containment", "when")


def when(timestamp: str) -> str:
    """`2026-12-01T12:10:30.123Z` -> `2026-12-01 12:10:30Z`."""
    return f"{timestamp[:19].replace('T', ' ')}Z" if len(timestamp) >= 19 else timestamp or "-"


def table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _header(result: Audit) -> list[str]:
    document = result.run.document
    system = document.get("os") or {}
    platform_line = " ".join(
        str(system.get(key)) for key in ("system", "release", "machine") if system.get(key)
    )
    return [
        f"run {result.run.id}: {' '.join(document.get('argv') or [])} "
        f"(exit {document.get('exit_code')})",
        f"flowproof {document.get('flowproof')}, {platform_line or 'unknown OS'}, "
        f"Python {document.get('python')}",
    ]


def render_controls(result: Audit) -> list[str]:
    from flowproof_cli.evidence.controls import VERDICTS  # noqa: PLC0415

    controls = result.run.controls
    if not controls:
        return ["no control in this run. Fix: declare `control: {id: ...}` in a flow to audit it"]
    started = when(result.run.started_at)
    rows = [list(_HEADINGS)]
    reasons: dict[int, str] = {}
    for row in controls:
        if row.get("reason"):
            reasons[len(rows)] = str(row["reason"])
        rows.append(
            [
                str(row.get("id")),
                str(row.get("verdict")),
                ", ".join(row.get("lanes") or []) or "-",
                str(row.get("containment") or "(no agent ran)"),
                started,
            ]
        )
    lines = []
    for index, line in enumerate(table(rows)):
        lines.append(line)
        if index in reasons:
            lines.append(f"    why: {reasons[index]}")
    counts = Counter(str(row.get("verdict")) for row in controls)
    summary = ", ".join(f"{counts[verdict]} {verdict}" for verdict in VERDICTS)
    lines.append(f"{len(controls)} control(s): {summary}")
    return lines


def render_changes(since: str, changes: list[Change]) -> list[str]:
    def verdicts(change: Change) -> str:
        if change.kind == "added":
            return f"(new) {change.after}"
        if change.kind == "removed":
            return f"{change.before} -> (gone)"
        if change.kind == "kept":
            return str(change.after)
        return f"{change.before} -> {change.after}"

    lines = [f"since run {since}:"]
    if not changes:
        return [*lines, "    no control in either run"]
    rows = [[change.id, change.kind, verdicts(change)] for change in changes]
    lines.extend(f"    {line}" for line in table(rows))
    return lines


def render_checks(checks: list[FileCheck]) -> list[str]:
    lines = ["files judged, against the working tree:"]
    if not checks:
        return [*lines, "    none (no flow of this run read or wrote a file)"]
    rows = [[check.status, check.path, f"({check.kind} of {check.flow!r})"] for check in checks]
    lines.extend(f"    {line}" for line in table(rows))
    return lines


def verdict_lines(result: Audit) -> list[str]:
    """The closing line: what decided the exit code."""
    problems = []
    if result.since is not None:
        if result.bad_changes:
            problems.append(f"{_counted(result.bad_changes)} since run {result.since.id}")
    elif result.failing:
        problems.append(f"{len(result.failing)} control(s) failed or could not be certified")
    if result.changed_files:
        problems.append(f"{len(result.changed_files)} judged file(s) changed since the run")
    if problems:
        return [f"FAIL: {'; '.join(problems)}"]
    if result.since is not None:
        counted = _counted(result.changes or [])
        return [
            f"OK: no control regressed or disappeared since run {result.since.id}"
            + (f" ({counted})" if counted else "")
        ]
    return ["OK: every control passed" if result.run.controls else "OK: nothing to audit"]


def _counted(changes: list[Change]) -> str:
    """`2 kept, 1 added`, in the order of CHANGE_KINDS."""
    from flowproof_cli.evidence.audit import CHANGE_KINDS  # noqa: PLC0415

    counts = Counter(change.kind for change in changes)
    return ", ".join(f"{counts[kind]} {kind}" for kind in CHANGE_KINDS if counts[kind])


def render(result: Audit) -> list[str]:
    lines = [*_header(result), "", *render_controls(result)]
    if result.since is not None:
        lines += ["", *render_changes(result.since.id, result.changes or [])]
    if result.checks is not None:
        lines += ["", *render_checks(result.checks)]
    return [*lines, *verdict_lines(result)]


@click.command()
@click.argument(
    "directory",
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
@json_option
@click.option("--run", "run_id", metavar="ID", help="Audit run ID instead of the latest run.")
@click.option(
    "--since",
    "since_id",
    metavar="ID",
    help="Compare with run ID: fail when a control regressed or disappeared since.",
)
@click.option(
    "--verify",
    is_flag=True,
    help="Recompute the sha256 of each spec and trace the run judged; fail when one changed.",
)
def audit(
    directory: Path, as_json: bool, run_id: str | None, since_id: str | None, verify: bool
) -> None:
    """Report the controls of the latest run recorded under DIR (never replays)."""
    from flowproof_cli.evidence import audit as evidence  # noqa: PLC0415 - not for --help

    result = evidence.audit(directory, run_id=run_id, since_id=since_id, check=verify)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        for line in render(result):
            click.echo(line)
    sys.exit(result.exit_code)
