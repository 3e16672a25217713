"""`flowproof run SPEC|DIR`: replay flows from their traces, offline."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from flowproof_cli.cassette import Mode
from flowproof_cli.cli.options import json_option, timeout_option
from flowproof_cli.cli.output import print_results
from flowproof_cli.errors import FlowproofError, SpecError
from flowproof_cli.runner.discovery import discover_specs
from flowproof_cli.runner.flow import run_flow
from flowproof_cli.runner.verdict import FlowResult
from flowproof_cli.spec import load_spec
from flowproof_cli.trace import trace_path_for


def _run_one(spec_path: Path, trace_path: Path, timeout: float | None) -> FlowResult:
    spec = load_spec(spec_path)
    return asyncio.run(run_flow(spec, mode=Mode.REPLAY, trace_path=trace_path, timeout_s=timeout))


@click.command()
@click.argument("target", metavar="SPEC|DIR", type=click.Path(exists=True, path_type=Path))
@click.option(
    "-t",
    "--trace",
    "trace",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trace to replay (single spec only; default: x.trace.yaml beside x.flow.yaml).",
)
@timeout_option
@json_option
def run(target: Path, trace: Path | None, timeout: float | None, as_json: bool) -> None:
    """Replay SPEC, or every *.flow.yaml below DIR, from recorded traces. No model, no key."""
    if target.is_file():
        result = _run_one(target, trace or trace_path_for(target), timeout)
        sys.exit(print_results([result], as_json=as_json, summary=False))
    if trace is not None:
        raise click.UsageError("-t/--trace names one trace: use it with a single spec")
    specs = discover_specs(target)
    if not specs:
        raise SpecError(f"no *.flow.yaml below {target}")
    results: list[FlowResult] = []
    for spec_path in specs:
        try:
            results.append(_run_one(spec_path, trace_path_for(spec_path), timeout))
        except FlowproofError as exc:
            failed = FlowResult(spec_path.name, spec_path, "replay", trace_path_for(spec_path))
            failed.error = str(exc)
            results.append(failed)
    sys.exit(print_results(results, as_json=as_json, summary=True))
