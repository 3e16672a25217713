"""`flowproof run SPEC|DIR`: replay flows from their traces, offline."""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flowproof_cli.cli.options import (
    fs_report_option,
    jobs_option,
    json_option,
    timeout_option,
    trace_file_option,
)
from flowproof_cli.cli.output import (
    overall_exit_code,
    print_flow,
    print_json,
    print_results,
    summary_line,
)
from flowproof_cli.errors import SpecError
from flowproof_cli.mode import Mode

if TYPE_CHECKING:
    from flowproof_cli.verdict import FlowResult


@click.command()
@click.argument("target", metavar="SPEC|DIR", type=click.Path(exists=True, path_type=Path))
@trace_file_option(
    "-t",
    "--trace",
    "trace",
    help="Trace to replay (single spec only; default: x.trace.yaml beside x.flow.yaml).",
)
@timeout_option
@json_option
@jobs_option
@fs_report_option
def run(
    *,
    target: Path,
    trace: Path | None,
    timeout: float | None,
    as_json: bool,
    jobs: int,
    fs_report: str,
) -> None:
    """Replay SPEC, or every *.flow.yaml below DIR, from recorded traces. No model, no key."""
    # The runner only here, not at import: `flowproof run --help` needs none of it.
    from flowproof_cli.evidence.records import RunRecord  # noqa: PLC0415
    from flowproof_cli.runner.job import plan_jobs  # noqa: PLC0415
    from flowproof_cli.runner.parallel import execute  # noqa: PLC0415

    if target.is_file():
        (job,) = plan_jobs(
            [target], mode=Mode.REPLAY, environ=os.environ, timeout_s=timeout, trace_path=trace
        )
        with RunRecord(target.parent, [job]) as record:
            record.results = [execute(job)]
            sys.exit(
                print_results(record.results, as_json=as_json, summary=False, fs_report=fs_report)
            )
    if trace is not None:
        raise click.UsageError("-t/--trace names one trace: use it with a single spec")
    # A directory run's own parts: a single spec never loads them.
    from flowproof_cli.evidence.controls import check_unique_ids  # noqa: PLC0415
    from flowproof_cli.runner.discovery import discover_specs  # noqa: PLC0415
    from flowproof_cli.runner.junit import write_junit  # noqa: PLC0415
    from flowproof_cli.runner.parallel import run_jobs  # noqa: PLC0415

    specs = discover_specs(target)
    if not specs:
        raise SpecError(f"no *.flow.yaml below {target}")
    check_unique_ids(specs)  # before any flow runs
    planned = plan_jobs(
        specs, mode=Mode.REPLAY, environ=os.environ, timeout_s=timeout, in_directory=True
    )
    started = time.monotonic()
    on_result = None if as_json else functools.partial(_print_timed, fs_report=fs_report)
    with RunRecord(target, planned) as record:
        results = record.results = run_jobs(planned, jobs, on_result=on_result)
        try:
            write_junit(results, target, elapsed_s=time.monotonic() - started)
        except OSError as exc:  # a read-only checkout still gets its verdicts
            click.echo(f"warning: could not write the JUnit XML: {exc}", err=True)
        if as_json:
            sys.exit(print_json(results))
        click.echo(summary_line(results))
        sys.exit(overall_exit_code(results))


def _print_timed(result: FlowResult, *, fs_report: str) -> None:
    print_flow(result, with_time=True, fs_report=fs_report)
