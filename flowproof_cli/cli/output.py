"""Everything flowproof prints for humans or machines about flow results."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from flowproof_cli.errors import ExitCode
from flowproof_cli.verdict import FlowResult


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


def verdict_line(result: FlowResult, *, with_time: bool = False) -> str:
    took = f" ({result.duration_s:.1f}s)" if with_time else ""
    if result.skipped is not None:  # a skipped flow did not run: no time to show
        return f"SKIP: {result.name} - {result.skipped}"
    if result.error is not None:
        first, *rest = result.error.splitlines() or [""]
        lines = [f"ERROR: {result.name}{took} - {first}", *(f"    {line}" for line in rest)]
        return "\n".join(lines)
    if result.passed:
        return f"PASS: {result.name}{took}"
    first, *rest = result.failures[0].splitlines()
    lines = [f"FAIL: {result.name}{took} - {first}", *(f"    {line}" for line in rest)]
    lines.extend(_indent(f"also: {failure}") for failure in result.failures[1:])
    return "\n".join(lines)


def print_flow(result: FlowResult, *, with_time: bool, fs_report: str = "summary") -> None:
    """One flow's verdict and its notes, as soon as it is known."""
    click.echo(verdict_line(result, with_time=with_time))
    if result.containment is not None:
        click.echo(_indent(result.containment))
    for server, calls in result.mcp_calls.items():
        click.echo(_indent(f"mcp: {server} {calls} call(s)"))
    if result.egress_report:  # only contained runs have one: others never import egress
        from flowproof_cli.egress.report import printed_lines  # noqa: PLC0415

        for line in printed_lines(result.egress_report, fs_report):
            click.echo(line, err=True)
    for note in result.notes:
        # Warnings carry their own label; everything else is a note.
        click.echo(_indent(note if note.startswith("warning:") else f"note: {note}"))
    if result.trace_written:
        click.echo(f"    wrote {result.trace_path} ({result.recorded_turns} turn(s))")


def summary_line(results: Sequence[FlowResult]) -> str:
    counts = {status: 0 for status in ("passed", "failed", "error", "skipped")}
    for result in results:
        counts[result.status] += 1
    line = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    return line + (f", {counts['error']} error(s)" if counts["error"] else "")


def print_json(results: Sequence[FlowResult]) -> ExitCode:
    code = overall_exit_code(results)
    payload = {
        "exit_code": int(code),
        "passed": code == ExitCode.PASSED,
        "flows": [result.to_json() for result in results],
    }
    click.echo(json.dumps(payload, indent=2, sort_keys=True))
    return code


def print_results(
    results: Sequence[FlowResult], *, as_json: bool, summary: bool, fs_report: str = "summary"
) -> ExitCode:
    if as_json:
        return print_json(results)
    for result in results:
        print_flow(result, with_time=summary, fs_report=fs_report)
    if summary:
        click.echo(summary_line(results))
    return overall_exit_code(results)


def overall_exit_code(results: Sequence[FlowResult]) -> ExitCode:
    if any(result.status == "error" for result in results):
        return ExitCode.ERROR
    if any(result.status == "failed" for result in results):
        return ExitCode.FAILED
    return ExitCode.PASSED
