"""`flowproof diff OLD NEW`: the trajectory diff between two traces (exit 1 when they differ).

The same diff a re-record prints before it asks to replace a trace. It reads the two files
and, for the asserted marks, the spec; it never runs anything.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flowproof_cli.errors import ExitCode, SpecError

if TYPE_CHECKING:
    from flowproof_cli.evidence.trajectory_diff import Intent


@click.command()
@click.argument("old", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("new", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=(
        "Mark the tool calls and argument paths this spec asserts (default: the x.flow.yaml "
        "beside OLD, when there is one)."
    ),
)
def diff(old: Path, new: Path, spec_path: Path | None) -> None:
    """What the agent did and was told differently from trace OLD to trace NEW.

    Exit 0 when the trajectory is unchanged, 1 when it differs, 2 when a file is not a
    readable trace.
    """
    from flowproof_cli import trace as traces  # noqa: PLC0415 - not for --help
    from flowproof_cli.evidence.trajectory_diff import diff_traces  # noqa: PLC0415

    old_trace, new_trace = traces.load(old), traces.load(new)
    intent = _intent(spec_path, old)
    result = diff_traces(old_trace, new_trace, intent, old_source=str(old), new_source=str(new))
    click.echo(f"{old} -> {new}")
    for line in result.lines():
        click.echo(line)
    sys.exit(ExitCode.PASSED if result.unchanged else ExitCode.FAILED)


def spec_beside(trace_path: Path) -> Path | None:
    """`x.trace.yaml` (or `x.trace.candidate.yaml`) -> `x.flow.yaml`, when the name says."""
    from flowproof_cli.trace.storage import SPEC_SUFFIX, TRACE_SUFFIX  # noqa: PLC0415

    # A trace's names: `x.trace.yaml`, and a re-record's `x.trace.candidate.yaml`.
    for suffix in (".trace.candidate.yaml", TRACE_SUFFIX):
        if trace_path.name.endswith(suffix):
            return trace_path.with_name(trace_path.name[: -len(suffix)] + SPEC_SUFFIX)
    return None


def _intent(spec_path: Path | None, old: Path) -> Intent:
    """A named spec must load (exit 2 otherwise); the one found beside OLD only may."""
    from flowproof_cli.evidence.trajectory_diff import Intent, intent_of  # noqa: PLC0415
    from flowproof_cli.spec import load_spec  # noqa: PLC0415

    if spec_path is not None:
        return intent_of(load_spec(spec_path))
    beside = spec_beside(old)
    if beside is None or not beside.is_file():
        return Intent()
    try:
        return intent_of(load_spec(beside))
    except SpecError as exc:
        click.echo(f"warning: asserted calls are not marked: {exc}", err=True)
        return Intent()
