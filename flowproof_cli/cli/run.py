"""`flowproof run SPEC|DIR`: replay flows from their traces, offline."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flowproof_cli.cli.main import VERDICTS, FlowCommand
from flowproof_cli.cli.options import (
    all_changes_option,
    fs_report_option,
    jobs_option,
    json_option,
    keep_going_option,
    quiet_option,
    timeout_option,
    trace_file_option,
    verbose_option,
)
from flowproof_cli.cli.output import (
    overall_exit_code,
    print_flow,
    print_json,
    print_results,
    print_summary,
    start_progress,
)
from flowproof_cli.errors import SpecError
from flowproof_cli.mode import Mode

if TYPE_CHECKING:
    from flowproof_cli.runner.discovery import Shard
    from flowproof_cli.verdict import FlowResult

_INSPECT = "flowproof.inspect"  # ctx.meta: --inspect was given


@click.command(cls=FlowCommand)
@click.argument("target", metavar="SPEC|DIR", type=click.Path(exists=True, path_type=Path))
@trace_file_option(
    "-t",
    "--trace",
    "trace",
    help="Trace to replay (single spec only; default: x.trace.yaml beside x.flow.yaml).",
)
@timeout_option
@keep_going_option
@click.option(
    "--inspect",
    is_flag=True,
    expose_value=False,
    callback=lambda ctx, _param, value: _want_inspect(ctx, value),
    help="Serve the run's flows live in mitmweb on 127.0.0.1 (the URL is printed), and keep "
    "serving after the verdicts until Ctrl-C.",
)
@json_option
@jobs_option
@fs_report_option
@quiet_option
@verbose_option
@all_changes_option
@click.option(
    "--shard",
    metavar="K/N",
    default=None,
    callback=lambda _ctx, _param, value: _parse_shard(value),
    help="Run only shard K of N of DIR's flows (sorted by path, every Nth from the Kth).",
)
def run(
    *,
    target: Path,
    trace: Path | None,
    timeout: float | None,
    keep_going: bool,
    as_json: bool,
    jobs: int,
    fs_report: str,
    shard: Shard | None,
) -> None:
    """Replay SPEC, or every *.flow.yaml below DIR, from recorded traces. No model, no key."""
    # The runner only here, not at import: `flowproof run --help` needs none of it.
    from flowproof_cli.evidence.records import RunRecord  # noqa: PLC0415
    from flowproof_cli.runner.job import plan_jobs  # noqa: PLC0415
    from flowproof_cli.runner.parallel import execute  # noqa: PLC0415

    plan = functools.partial(
        plan_jobs, mode=Mode.REPLAY, environ=os.environ, timeout_s=timeout, keep_going=keep_going
    )
    if shard is not None and not target.is_dir():
        raise click.UsageError("--shard splits the flows of a directory: give DIR, not a spec")
    if not target.is_dir():  # one spec: the loader names a FIFO or a device for what it is
        (job,) = plan([target], trace_path=trace)
        with RunRecord(target.parent, VERDICTS.owe([job])) as record:
            record.results = [_inspected(execute, job)]
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
    if shard is not None:
        selected = shard.select(specs, target)
        click.echo(f"shard {shard}: {len(selected)} of {len(specs)} flow(s)", err=True)
        specs = selected
    planned = VERDICTS.owe(plan(specs, in_directory=True))
    if not as_json:
        start_progress(len(planned))
    started = time.monotonic()
    on_result = None if as_json else functools.partial(_print_timed, fs_report=fs_report)
    with RunRecord(target, planned) as record:
        results = record.results = _inspected(run_jobs, planned, jobs, on_result=on_result)
        try:
            write_junit(results, target, elapsed_s=time.monotonic() - started)
        except OSError as exc:  # a read-only checkout still gets its verdicts
            click.echo(f"warning: could not write the JUnit XML: {exc}", err=True)
        if as_json:
            sys.exit(print_json(results))
        print_summary(results)
        sys.exit(overall_exit_code(results))


def _parse_shard(value: str | None) -> Shard | None:
    from flowproof_cli.runner.discovery import parse_shard  # noqa: PLC0415

    try:
        return None if value is None else parse_shard(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--shard'") from None


def _want_inspect(ctx: click.Context, wanted: bool) -> None:
    """`--inspect` is kept aside (no parameter of `run`): `_inspected` reads it."""
    ctx.meta[_INSPECT] = wanted


def _inspected[R](runner: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """`runner(...)` (`execute`, `run_jobs`); with `--inspect`, mitmweb is started first (its
    URL printed) and taps the run's proxy. It stops when the command ends: after a run that
    reached its verdicts, only once Ctrl-C says so (flowproof_cli/inspect/live.py)."""
    ctx = click.get_current_context()
    if not ctx.meta.get(_INSPECT):
        return runner(*args, **kwargs)
    from flowproof_cli.inspect.live import LiveView  # noqa: PLC0415

    live = LiveView.start(True)
    ctx.call_on_close(lambda: live.finish(_say))
    click.echo(f"inspect: serving this run's flows at {live.url}", err=True)
    return live.run(runner, *args, **kwargs)


def _say(message: str) -> None:
    click.echo(message, err=True)


def _print_timed(result: FlowResult, *, fs_report: str) -> None:
    print_flow(result, with_time=True, fs_report=fs_report)
