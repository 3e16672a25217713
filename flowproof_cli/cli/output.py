"""Everything flowproof prints for humans or machines about flow results."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from flowproof_cli.errors import ExitCode
from flowproof_cli.runner.verdict import FlowResult


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


def verdict_line(result: FlowResult, *, with_time: bool = False) -> str:
    took = f" ({result.duration_s:.1f}s)" if with_time else ""
    if result.skipped is not None:
        return f"SKIP: {result.name}{took} - {result.skipped}"
    if result.error is not None:
        return f"ERROR: {result.name}{took} - {result.error}"
    if result.passed:
        return f"PASS: {result.name}{took}"
    first, *rest = result.failures[0].splitlines()
    lines = [f"FAIL: {result.name}{took} - {first}", *(f"    {line}" for line in rest)]
    lines.extend(_indent(f"also: {failure}") for failure in result.failures[1:])
    return "\n".join(lines)


def print_results(results: Sequence[FlowResult], *, as_json: bool, summary: bool) -> ExitCode:
    code = overall_exit_code(results)
    if as_json:
        payload = {
            "exit_code": int(code),
            "passed": code == ExitCode.PASSED,
            "flows": [result.to_json() for result in results],
        }
        click.echo(json.dumps(payload, indent=2, sort_keys=True))
        return code
    for result in results:
        click.echo(verdict_line(result, with_time=summary))
        for note in result.notes:
            click.echo(f"    note: {note}")
        if result.trace_written:
            click.echo(f"    wrote {result.trace_path} ({result.recorded_turns} turn(s))")
    if summary:
        counts = {status: 0 for status in ("passed", "failed", "error", "skipped")}
        for result in results:
            counts[result.status] += 1
        click.echo(
            f"{counts['passed']} passed, {counts['failed']} failed"
            + (f", {counts['skipped']} skipped" if counts["skipped"] else "")
            + (f", {counts['error']} error(s)" if counts["error"] else "")
        )
    return code


def overall_exit_code(results: Sequence[FlowResult]) -> ExitCode:
    if any(result.status == "error" for result in results):
        return ExitCode.ERROR
    if any(result.status == "failed" for result in results):
        return ExitCode.FAILED
    return ExitCode.PASSED
