"""`flowproof chaos SPEC|DIR`: a resilience map of passing flows, at no model cost."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flowproof_cli.cli.main import VERDICTS, FlowCommand
from flowproof_cli.cli.options import SECONDS, json_option
from flowproof_cli.errors import ExitCode, SpecError
from flowproof_cli.mode import Mode

if TYPE_CHECKING:
    from flowproof_cli.runner.chaos import FlowChaos, Sweep

#: Spelt out here (and checked equal to flowproof_cli/runner/chaos.py by the tests) so that
#: `flowproof chaos --help` loads no runner.
KINDS = ("429", "500", "503", "529", "reset", "cut", "mcp-error", "mcp-crash")
DEFAULT_KINDS = ("429", "500", "529", "reset", "cut")
FAIL_ON = ("survived", "diverged", "crashed", "hung", "wrong", "n/a", "not-passing")


def _names(valid: tuple[str, ...], what: str, option: str) -> click.types.FuncParamType:
    def convert(text: str | tuple[str, ...]) -> tuple[str, ...]:
        if isinstance(text, tuple):  # the default, already parsed
            return text
        names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
        unknown = [name for name in names if name not in valid]
        if unknown or not names:
            given = ", ".join(unknown) if unknown else repr(text)
            raise click.BadParameter(
                f"{given} is not {what}; the valid ones are: {', '.join(valid)}",
                param_hint=f"'{option}'",
            )
        return names

    return click.types.FuncParamType(convert)


@click.command(cls=FlowCommand)
@click.argument("target", metavar="SPEC|DIR", type=click.Path(exists=True, path_type=Path))
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Replays at once (cells of every flow share them), on one proxy in one process.",
)
@click.option(
    "--kinds",
    type=_names(KINDS, "a fault kind", "--kinds"),
    default=",".join(DEFAULT_KINDS),
    show_default=True,
    metavar="K,K,...",
    help="The faults to inject, comma-separated: 429 (retry-after 0.05 s), 500, 503, 529 "
    "(each an answer with that status, once), reset (the connection closed), cut (the stream "
    "ends after its first chunk); and, only when named, the MCP kinds mcp-error (a JSON-RPC "
    "error) and mcp-crash (the server exits), at each MCP server's tools/call.",
)
@click.option(
    "--fail-on",
    type=_names(FAIL_ON, "an outcome", "--fail-on"),
    default=None,
    metavar="O,O,...",
    help="Exit 1 when a cell ends in one of these outcomes (survived, diverged, crashed, hung, "
    "wrong, n/a) or a flow does not pass without faults (not-passing). Default: exit 0.",
)
@click.option(
    "--timeout",
    type=SECONDS,
    default=None,
    help="Seconds a cell's agent may run before it is killed and the cell is hung (default: "
    "the spec's timeout, at most 60).",
)
@json_option
def chaos(
    *,
    target: Path,
    jobs: int,
    kinds: tuple[str, ...],
    fail_on: tuple[str, ...] | None,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Replay each passing flow once per (call x fault kind), one fault at a time, offline,
    and map what the agent survives.

    A flow is replayed plainly first; one that does not pass gets no cells. Then each model
    call of its recording (and, with MCP kinds, each MCP tools/call) is faulted once per
    kind. A cell is survived (passed unchanged: the agent retried transparently), diverged
    (the agent did something the recording does not have), crashed, hung, wrong (exit 0 but
    the flow failed) or n/a (the fault cannot apply there, such as a cut of a call that was
    not streamed). Exit 0 unless --fail-on names an outcome that occurred (then 1).
    """
    from flowproof_cli.runner.chaos import Sweep  # noqa: PLC0415

    specs = _specs(target)
    VERDICTS.expect(len(specs))
    sweep = Sweep(kinds=kinds, timeout_s=timeout, workers=jobs)
    flows = _swept(specs, sweep, in_directory=target.is_dir(), quiet=as_json)
    sys.exit(_report(flows, tuple(fail_on or ()), as_json=as_json))


def _specs(target: Path) -> list[Path]:
    if not target.is_dir():
        return [target]
    from flowproof_cli.runner.discovery import discover_specs  # noqa: PLC0415

    specs = discover_specs(target)
    if not specs:
        raise SpecError(f"no *.flow.yaml below {target}")
    return specs


def _swept(specs: list[Path], sweep: Sweep, *, in_directory: bool, quiet: bool) -> list[FlowChaos]:
    from flowproof_cli.runner.chaos import run_sweep  # noqa: PLC0415
    from flowproof_cli.runner.job import plan_jobs  # noqa: PLC0415

    jobs = plan_jobs(
        specs,
        mode=Mode.REPLAY,
        environ=os.environ,
        timeout_s=sweep.timeout_s,  # the baseline's too, when given
        in_directory=in_directory,
    )
    return run_sweep(jobs, sweep, on_flow=None if quiet else _planned)


def _planned(chaos: FlowChaos) -> None:
    """Progress on stderr: each flow's baseline judged, and its cells about to run."""
    if chaos.passing:
        click.echo(
            f"chaos: {chaos.name}: passes without faults; {len(chaos.planned)} cell(s)", err=True
        )


def _report(flows: list[FlowChaos], fail_on: tuple[str, ...], *, as_json: bool) -> int:
    from flowproof_cli.runner.chaos import (  # noqa: PLC0415
        LEGEND,
        failed_on,
        render_flow,
        summary_line,
        to_document,
    )

    if as_json:
        click.echo(json.dumps(to_document(flows), indent=2))
    else:
        for chaos in flows:
            click.echo("\n".join(render_flow(chaos)))
        if any(chaos.cells for chaos in flows):
            click.echo(f"legend: {LEGEND}")
        click.echo(summary_line(flows))
    VERDICTS.gave(len(flows))
    hit = failed_on(flows, fail_on)
    if hit and not as_json:
        click.echo(f"chaos: --fail-on {','.join(hit)}: occurred", err=True)
    return ExitCode.FAILED if hit else ExitCode.PASSED
