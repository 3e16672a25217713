"""`flowproof check [PATH...]`: specs and suites validated, stale traces found, nothing run.

Exit 0 when every spec and suite loads and every trace fits its spec, 1 when some trace is
missing or was recorded under other mocks, faults, match rules or turns than its spec now
declares (runner/staleness.py), 2 when a spec, suite or trace does not load. Every file is
checked, whatever an earlier one said: a pre-commit hook or a CI job sees all the problems
at once. No proxy, no agent, no mitmproxy import.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flowproof_cli.cli.options import json_option
from flowproof_cli.errors import ExitCode, FlowproofError

if TYPE_CHECKING:
    from flowproof_cli.match.build import Declared


@dataclass
class Checked:
    """What `check` found: a line per problem, in the order the files were named."""

    errors: list[str] = field(default_factory=list)  # a spec, suite or trace that does not load
    stale: list[dict[str, Any]] = field(default_factory=list)  # {spec, trace, differences, fix}
    skipped: list[str] = field(default_factory=list)  # a trace with no spec beside it
    notes: list[str] = field(default_factory=list)  # worth knowing, not stale
    flows: int = 0
    suites: int = 0
    current: int = 0  # flows whose trace fits their spec

    @property
    def exit_code(self) -> int:
        if self.errors:
            return ExitCode.ERROR
        return ExitCode.FAILED if self.stale else ExitCode.PASSED


@click.command()
@click.argument(
    "paths",
    metavar="[PATH]...",
    nargs=-1,
    type=click.Path(exists=True, path_type=Path),
)
@json_option
def check(paths: tuple[Path, ...], as_json: bool) -> None:
    """Validate specs and suites and find stale traces, without running anything.

    PATH is a spec, a suite.yaml, a trace (its spec is checked) or a folder searched as
    `flowproof run DIR` finds flows (default: the current folder). Exit 0: all current; 1:
    a trace is missing or was recorded under other mocks, faults, match rules or turns than
    its spec declares; 2: a spec, suite or trace does not load.
    """
    specs, suites, skipped = _targets(paths or (Path("."),))
    found = Checked(skipped=skipped)
    _check_all(specs, suites, found)
    if as_json:
        document = {
            "flows": found.flows,
            "suites": found.suites,
            "current": found.current,
            "errors": found.errors,
            "stale": found.stale,
            "skipped": found.skipped,
            "notes": found.notes,
            "exit_code": int(found.exit_code),
        }
        click.echo(json.dumps(document, indent=2))
    else:
        _print_text(found)
    sys.exit(found.exit_code)


def _targets(paths: Iterable[Path]) -> tuple[list[Path], list[Path], list[str]]:
    """The specs and the suites the paths name, each once, in order; and the traces named
    that have no spec beside them (nothing to check them against)."""
    from flowproof_cli.runner.discovery import discover_specs, discover_suites  # noqa: PLC0415
    from flowproof_cli.runner.staleness import spec_path_of_trace  # noqa: PLC0415
    from flowproof_cli.spec.suite import SUITE_FILE  # noqa: PLC0415
    from flowproof_cli.trace.storage import TRACE_SUFFIX  # noqa: PLC0415

    specs: dict[Path, None] = {}
    suites: dict[Path, None] = {}
    skipped = []
    for path in paths:
        if path.is_dir():
            specs.update(dict.fromkeys(discover_specs(path)))
            suites.update(dict.fromkeys(map(_real, discover_suites(path))))
        elif path.name == SUITE_FILE:
            suites[_real(path)] = None
            specs.update(dict.fromkeys(discover_specs(path.parent)))
        elif path.name.endswith(TRACE_SUFFIX):
            spec = spec_path_of_trace(path)
            if spec.exists():
                specs[spec] = None
            else:
                skipped.append(f"{path}: no spec {spec.name} beside it to check it against")
        else:
            specs[path] = None
    return list(specs), list(suites), skipped


def _real(suite: Path) -> Path:
    """A suite as `nearest_suite` names it, so each loads (and is counted) once."""
    return Path(os.path.realpath(suite))


def _check_all(specs: list[Path], suites: list[Path], found: Checked) -> None:
    """Every suite, then every flow, into `found`; a suite loads once, however many flows
    lie below it."""
    from flowproof_cli.runner.discovery import nearest_suite  # noqa: PLC0415

    loaded: dict[Path | None, tuple[Declared, ...] | None] = {None: ()}
    for named in suites:
        loaded[named] = _suite_match(named, found)
    for spec_path in specs:
        suite = nearest_suite(spec_path)
        if suite not in loaded:
            loaded[suite] = _suite_match(suite, found)
        _check_flow(spec_path, suite, loaded[suite], found)


def _suite_match(suite: Path | None, found: Checked) -> tuple[Declared, ...] | None:
    """The suite's `match:` block for the flows below it; None when it does not load."""
    from flowproof_cli.spec.suite import load_suite  # noqa: PLC0415

    if suite is None:
        return ()
    found.suites += 1
    try:
        loaded = load_suite(suite)
    except FlowproofError as exc:
        found.errors.append(str(exc))
        return None
    return (loaded.match.declared(suite.parent, "suite"),) if loaded.match else ()


def _check_flow(
    spec_path: Path,
    suite: Path | None,
    suite_match: tuple[Declared, ...] | None,
    found: Checked,
) -> None:
    """The spec loads, then (its suite loaded) its trace is compared with it."""
    from flowproof_cli.runner.staleness import staleness  # noqa: PLC0415
    from flowproof_cli.spec import load_spec  # noqa: PLC0415
    from flowproof_cli.trace import trace_path_for  # noqa: PLC0415

    found.flows += 1
    try:
        spec = load_spec(spec_path)
        if suite_match is None:
            found.errors.append(
                f"{spec_path}: not compared with its trace: its suite {suite} does not load "
                "(said above). Fix: fix the suite, then check again"
            )
            return
        verdict = staleness(spec, spec_path, trace_path_for(spec_path), suite_match)
    except FlowproofError as exc:
        found.errors.append(str(exc))
        return
    found.notes.extend(f"{spec_path}: {note}" for note in verdict.notes)
    if not verdict.differences:
        found.current += 1
        return
    found.stale.append(
        {
            "spec": str(spec_path),
            "trace": str(verdict.trace_path),
            "differences": verdict.differences,
            "fix": verdict.fix,
        }
    )


def _print_text(found: Checked) -> None:
    for error in found.errors:
        click.echo(f"error: {error}")
    for flow in found.stale:
        what = "; ".join(flow["differences"])
        click.echo(f"stale: {flow['spec']}: {what}. Fix: {flow['fix']}")
    for skipped in found.skipped:
        click.echo(f"skipped: {skipped}")
    for note in found.notes:
        click.echo(f"note: {note}")
    click.echo(
        f"checked {found.flows} flow(s) and {found.suites} suite(s): {found.current} current, "
        f"{len(found.stale)} stale, {len(found.errors)} error(s)"
    )
