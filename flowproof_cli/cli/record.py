"""`flowproof record SPEC`: run the agent against the real model once and write its trace."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flowproof_cli.cli.main import VERDICTS, FlowCommand
from flowproof_cli.cli.options import (
    fs_report_option,
    json_option,
    quiet_option,
    timeout_option,
    trace_file_option,
    yes_option,
)
from flowproof_cli.mode import Mode

if TYPE_CHECKING:
    from flowproof_cli.verdict import FlowResult


def _seconds(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A finite number > 0 (click's FloatRange lets `nan` through); imported only when the
    option is given, so parsing the command line loads no cassette."""
    if value is None:
        return None
    from flowproof_cli.cassette.upstream import parse_seconds  # noqa: PLC0415

    seconds = parse_seconds(value)
    if seconds is None:
        raise click.BadParameter(f"{value!r} is not a number of seconds > 0 (e.g. 120)")
    return seconds


upstream_timeout_option = click.option(
    "--upstream-timeout",
    metavar="SECONDS",
    callback=_seconds,
    help=(
        "Seconds to wait for each answer of the upstream model, and of a `url:` MCP server, "
        "before the record fails (default: FLOWPROOF_UPSTREAM_TIMEOUT, else 120)."
    ),
)


@click.command(cls=FlowCommand)
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@trace_file_option(
    "-o", "--output", help="Where to write the trace (default: x.trace.yaml beside x.flow.yaml)."
)
@timeout_option
@upstream_timeout_option
@json_option
@fs_report_option
@quiet_option
@yes_option
def record(
    *,
    spec_path: Path,
    output: Path | None,
    timeout: float | None,
    upstream_timeout: float | None,
    as_json: bool,
    fs_report: str,
    yes: bool,
) -> None:
    """Record SPEC against the real model (FLOWPROOF_AGENT_UPSTREAM, FLOWPROOF_AGENT_KEY).

    The trace is written only when every assertion of the flow passes. The nearest
    suite.yaml above SPEC applies (its env, env_from and hooks). Replacing an existing
    trace whose trajectory changed prints the trajectory diff and asks first (see --yes).
    """
    # The runner only here, not at import: `flowproof record --help` needs none of it.
    from flowproof_cli.cli.commit import finish_record  # noqa: PLC0415
    from flowproof_cli.evidence.records import RunRecord  # noqa: PLC0415
    from flowproof_cli.runner.job import plan_jobs  # noqa: PLC0415
    from flowproof_cli.runner.parallel import execute  # noqa: PLC0415

    (job,) = plan_jobs(
        [spec_path], mode=Mode.RECORD, environ=os.environ, timeout_s=timeout, trace_path=output
    )
    if upstream_timeout is not None:  # over the suite's env too: the command line wins
        from flowproof_cli.cassette.upstream import TIMEOUT_VARIABLE  # noqa: PLC0415

        environ = {**job.environ, TIMEOUT_VARIABLE: repr(upstream_timeout)}
        job = dataclasses.replace(job, environ=environ)
    with RunRecord(spec_path.parent, VERDICTS.owe([job])) as record:  # written however it ends
        results = record.results = [execute(job)]
        sys.exit(
            finish_record(
                results,
                review=lambda: review_recordings(results, yes=yes, as_json=as_json),
                as_json=as_json,
                fs_report=fs_report,
            )
        )


def review_recordings(results: list[FlowResult], *, yes: bool, as_json: bool) -> None:
    """Candidates are approved on the terminal: asked only when stdin is one and the output
    is not `--json`; otherwise they wait beside their traces (runner/rerecord.py)."""
    from flowproof_cli.runner.rerecord import review  # noqa: PLC0415

    interactive = not as_json and sys.stdin.isatty()
    review(
        results,
        yes=yes,
        ask=_confirm if interactive else None,
        echo=None if as_json else click.echo,
    )


def _confirm(question: str) -> bool:
    return click.confirm(question, default=False)
