"""`flowproof record SPEC`: run the agent against the real model once and write its trace."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from flowproof_cli.cassette import Mode
from flowproof_cli.cli.options import fs_report_option, json_option, timeout_option
from flowproof_cli.cli.output import print_results
from flowproof_cli.runner.job import execute, plan_jobs


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the trace (default: x.trace.yaml beside x.flow.yaml).",
)
@timeout_option
@json_option
@fs_report_option
def record(
    spec_path: Path, output: Path | None, timeout: float | None, as_json: bool, fs_report: str
) -> None:
    """Record SPEC against the real model (FLOWPROOF_AGENT_UPSTREAM, FLOWPROOF_AGENT_KEY).

    The trace is written only when every assertion of the flow passes. The nearest
    suite.yaml above SPEC applies (its env, env_from and hooks).
    """
    (job,) = plan_jobs(
        [spec_path], mode=Mode.RECORD, environ=os.environ, timeout_s=timeout, trace_path=output
    )
    sys.exit(print_results([execute(job)], as_json=as_json, summary=False, fs_report=fs_report))
