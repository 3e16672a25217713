"""Everything flowproof prints for humans or machines about flow results.

A person at a terminal gets colour (PASS green, FAIL and ERROR red, SKIP yellow) and, for a
directory run, a live progress line on stderr that is erased before each result; a pipe or
a file gets the same text plain, with no escape codes. NO_COLOR turns colour off and
FORCE_COLOR on (https://no-color.org, https://force-color.org), whatever the stream is.
`--quiet` keeps only the verdict lines (failures included) and the summary. A directory
run prints a passing flow's containment tier and notes only with `-v` (its warnings always).

Each closing document (a summary line, the JSON document, a single spec's verdict) tells
`cli.main.VERDICTS` how many flows it gave a verdict for: the exit path allows 0 (or 1)
only once that is every flow the command was asked to run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

import click

from flowproof_cli.cli.main import VERDICTS
from flowproof_cli.errors import ExitCode
from flowproof_cli.verdict import FlowResult

LABEL_COLOURS = {"PASS:": "green", "FAIL:": "red", "ERROR:": "red", "SKIP:": "yellow"}


@dataclass
class Settings:
    """How results are printed in this process, set by the command's options."""

    quiet: bool = False
    verbose: bool = False  # a directory run also prints a passing flow's tier and notes
    all_changes: bool = False  # a divergence lists every changed field, not the first few
    progress_total: int = 0  # flows in the running directory run; 0: no progress line
    progress_done: int = 0
    progress_shown: bool = False


SETTINGS = Settings()


def wants_colour(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    """NO_COLOR wins, then FORCE_COLOR (any value but "0"), then: is it a terminal?"""
    environ = os.environ if environ is None else environ
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def painted(text: str, *, colour: bool) -> str:
    """`text` with its verdict label coloured, when colour is on."""
    if not colour:
        return text
    for label, fg in LABEL_COLOURS.items():
        if text.startswith(label):
            return click.style(label, fg=fg, bold=True) + text[len(label) :]
    return text


def _echo_result_line(text: str) -> None:
    colour = wants_colour(sys.stdout)
    click.echo(painted(text, colour=colour), color=colour)


def start_progress(total: int) -> None:
    """A directory run of `total` flows: a progress line, only when stderr is a terminal."""
    isatty = getattr(sys.stderr, "isatty", None)
    SETTINGS.progress_total = total if isatty and isatty() else 0
    SETTINGS.progress_done = 0
    _draw_progress()


def _draw_progress() -> None:
    if not SETTINGS.progress_total:
        return
    done, total = SETTINGS.progress_done, SETTINGS.progress_total
    sys.stderr.write(f"\r\x1b[Krunning flows: {done}/{total} done")
    sys.stderr.flush()
    SETTINGS.progress_shown = True


def _erase_progress() -> None:
    if SETTINGS.progress_shown:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
        SETTINGS.progress_shown = False


def end_progress() -> None:
    _erase_progress()
    SETTINGS.progress_total = 0


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
    failures = shown_failures(result, all_changes=SETTINGS.all_changes)
    first, *rest = failures[0].splitlines()
    lines = [f"FAIL: {result.name}{took} - {first}", *(f"    {line}" for line in rest)]
    lines.extend(_indent(f"also: {failure}") for failure in failures[1:])
    if result.conversation is not None:  # which turns passed, which failed
        from flowproof_cli.evidence.turns import turns_line  # noqa: PLC0415

        turns = turns_line(result)
        if turns is not None:
            lines.append(_indent(turns))
    return "\n".join(lines)


def shown_failures(result: FlowResult, *, all_changes: bool) -> list[str]:
    """The flow's failures as printed: with `all_changes` (`--all-changes`), a divergence
    lists every changed field of the request under its message, not the first few and how
    many more (`--json` carries them all in any case, whole)."""
    divergence = result.divergence
    if not all_changes or not divergence or not divergence.get("changes"):
        return result.failure_texts
    from flowproof_cli.cassette.diff import FieldChange, with_every_change  # noqa: PLC0415

    message = str(divergence.get("message", ""))
    every = with_every_change(message, [FieldChange.from_json(c) for c in divergence["changes"]])
    return [
        failure.replace(message, every, 1) if message and message in failure else failure
        for failure in result.failure_texts
    ]


def print_flow(result: FlowResult, *, with_time: bool, fs_report: str = "summary") -> None:
    """One flow's verdict and its notes, as soon as it is known (a live progress line is
    erased first and drawn again after)."""
    _erase_progress()
    _print_flow(result, with_time=with_time, fs_report=fs_report)
    SETTINGS.progress_done += 1
    _draw_progress()


def _print_flow(result: FlowResult, *, with_time: bool, fs_report: str) -> None:
    _echo_result_line(verdict_line(result, with_time=with_time))
    if result.egress_report:  # only contained runs have one: others never import egress
        from flowproof_cli.egress.report import printed_lines  # noqa: PLC0415

        # Blocked egress is a failure: `--quiet` keeps it and drops the filesystem report.
        for line in printed_lines(result.egress_report, "off" if SETTINGS.quiet else fs_report):
            click.echo(line, err=True)
    if SETTINGS.quiet:
        return
    # A directory run (the only one printed with times) keeps a passing flow to its verdict,
    # MCP counts and warnings: its tier and notes are detail, shown with -v.
    detail = not (with_time and result.passed) or SETTINGS.verbose
    if result.containment is not None and detail:
        click.echo(_indent(result.containment))
    for server, calls in result.mcp_calls.items():
        click.echo(_indent(f"mcp: {server} {calls} call(s)"))
    for fault in result.faults:
        if detail and fault["applied"]:
            click.echo(_indent(f"fault: {fault['fault']}: {fault['applied']} attempt(s) faulted"))
    for note in result.notes:
        # Warnings carry their own label and are always printed; everything else is a note.
        if note.startswith("warning:"):
            click.echo(_indent(note))
        elif detail:
            click.echo(_indent(f"note: {note}"))
    if result.trace_written:
        click.echo(f"    wrote {result.trace_path} ({result.recorded_turns} turn(s))")


def summary_line(results: Sequence[FlowResult]) -> str:
    counts = {status: 0 for status in ("passed", "failed", "error", "skipped")}
    for result in results:
        counts[result.status] += 1
    line = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    return line + (f", {counts['error']} error(s)" if counts["error"] else "")


def print_summary(results: Sequence[FlowResult]) -> None:
    """The directory run's last line, after its progress line is gone."""
    end_progress()
    click.echo(summary_line(results))
    VERDICTS.gave(len(results))


def print_json(results: Sequence[FlowResult]) -> ExitCode:
    code = overall_exit_code(results)
    payload = {
        "exit_code": int(code),
        "passed": code == ExitCode.PASSED,
        "flows": [result.to_json() for result in results],
    }
    click.echo(json.dumps(payload, indent=2, sort_keys=True))
    VERDICTS.gave(len(results))
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
    VERDICTS.gave(len(results))
    return overall_exit_code(results)


def overall_exit_code(results: Sequence[FlowResult]) -> ExitCode:
    if any(result.status == "error" for result in results):
        return ExitCode.ERROR
    if any(result.status == "failed" for result in results):
        return ExitCode.FAILED
    return ExitCode.PASSED
