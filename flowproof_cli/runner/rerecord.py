"""Reviewed re-records: a recording that would replace a trace is a change someone approves.

Two halves, because with `-j N` several flows end at once and a question must not
interleave with their output:

* In the flow's process, `place_recording` (runner/flow.py, for a passing record only):
  with no trace yet the recording is staged to become the trace. Over an existing trace
  whose trajectory is unchanged it is staged without asking (only values the model mints,
  like ids and usage, can differ, and the file stays exactly what this run recorded). Any
  other recording goes beside the trace as `x.trace.candidate.yaml`; the result carries
  that path and the trajectory diff.
* Once every flow has ended, in the CLI, `review`: each candidate's diff is printed,
  then the candidate is staged when approved (`--yes`, or `y` at the prompt), deleted
  when refused (`n`), and kept beside the trace, with how to accept it, when nobody can be
  asked (no terminal). An unapproved candidate is a failure of the flow (exit 1).
* Last, `commit`: each staged recording is moved over its trace in one rename. The CLI does
  it in the same step as printing the verdict, where no signal can split the two
  (cli/commit.py); until then the old trace is untouched, and `discard` removes what was
  staged and never committed (an approved candidate stays beside the trace).

A failed record never gets here: it writes and removes nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flowproof_cli import trace as traces
from flowproof_cli.errors import TraceError
from flowproof_cli.evidence.records import file_sha256
from flowproof_cli.evidence.trajectory_diff import UNCHANGED, Intent, diff_traces
from flowproof_cli.process import commit_staged, discard_staged, stage, write_atomic
from flowproof_cli.trace.envelope import from_document, to_document
from flowproof_cli.trace.storage import TRACE_SUFFIX, dumps
from flowproof_cli.verdict import Failure, FlowResult

CANDIDATE_SUFFIX = ".trace.candidate.yaml"

Ask = Callable[[str], bool]  # a yes/no question on the terminal
Scrub = Callable[[Any], Any]  # a trace document with secret values replaced
Echo = Callable[[str], None]


def candidate_path_for(trace_path: Path) -> Path:
    """`x.trace.yaml` -> `x.trace.candidate.yaml`; another name gets `.candidate` before its
    suffix (`out.yaml` -> `out.candidate.yaml`)."""
    name = trace_path.name
    if name.endswith(TRACE_SUFFIX):
        return trace_path.with_name(name[: -len(TRACE_SUFFIX)] + CANDIDATE_SUFFIX)
    if trace_path.suffix:
        return trace_path.with_name(f"{trace_path.stem}.candidate{trace_path.suffix}")
    return trace_path.with_name(f"{name}.candidate")


def place_recording(
    trace_path: Path,
    recording: traces.Trace,
    intent: Intent,
    result: FlowResult,
    *,
    scrub: Scrub | None = None,
) -> None:
    """Stage a passing recording where it belongs (see the module docstring). `scrub` takes
    the spec's secrets out of every value of both traces before they are compared, so that
    no part of one reaches the diff, even from an old trace recorded before it was guarded."""
    text = dumps(recording)
    if not trace_path.exists():
        result.staged_trace = _staged(trace_path, text)
        return
    # Compared as it will be stored, read back, exactly as the old trace is.
    diff = _diff_lines(trace_path, traces.loads(text, "the new recording"), intent, scrub)
    if diff is None:
        result.staged_trace = _staged(trace_path, text)
        result.notes.append(
            f"{UNCHANGED}: rewrote {trace_path} without review (only values the model mints, "
            "such as ids and usage, can differ)"
        )
        return
    candidate = candidate_path_for(trace_path)
    try:
        write_atomic(candidate, text)
    except OSError as exc:
        raise _unwritable(candidate, exc) from None
    result.candidate_path = candidate
    result.trajectory_diff = diff


def _staged(trace_path: Path, text: str) -> Path:
    try:
        return stage(trace_path, text)
    except OSError as exc:
        raise _unwritable(trace_path, exc) from None


def _unwritable(path: Path, exc: OSError) -> TraceError:
    """A write that failed after the check before the agent started (the disk filled, the
    folder's permissions changed meanwhile)."""
    return TraceError(
        f"cannot write {path}: {exc.strerror or exc}. Fix: make {path.parent} writable (and "
        "check the free space), then record again"
    )


def _diff_lines(
    trace_path: Path, recording: traces.Trace, intent: Intent, scrub: Scrub | None
) -> list[str] | None:
    """The diff from the trace on disk, or None when the trajectory is unchanged."""
    try:
        old = traces.load(trace_path)
        if scrub is not None:
            old = from_document(scrub(to_document(old)), str(trace_path))
            recording = from_document(scrub(to_document(recording)), "the new recording")
        diff = diff_traces(
            old, recording, intent, old_source=str(trace_path), new_source="the new recording"
        )
    except TraceError as exc:
        return [
            f"the existing trace cannot be compared ({exc}); read the new recording whole "
            f"with `flowproof show {candidate_path_for(trace_path)}`"
        ]
    return None if diff.unchanged else diff.lines()


def review(results: Sequence[FlowResult], *, yes: bool, ask: Ask | None, echo: Echo | None) -> None:
    """Settle every candidate in `results`, in order. `ask` is None when nobody can be asked;
    `echo` None prints no diff (`--json` carries it as `trajectory_diff`)."""
    for result in results:
        candidate = result.candidate_path
        if candidate is None:
            continue
        if echo is not None:
            echo(f"{result.name}: the new recording differs from {result.trace_path}")
            for line in result.trajectory_diff:
                echo(f"  {line}")
        if yes:
            _accept(result, candidate)
        elif ask is None:
            result.failures.append(Failure(_how_to_accept(result, candidate)))
        elif ask(f"Replace {result.trace_path} with this recording?"):
            _accept(result, candidate)
        else:
            with contextlib.suppress(FileNotFoundError):
                candidate.unlink()
            result.candidate_path = None
            result.failures.append(
                Failure(
                    f"re-record refused: kept {result.trace_path} and discarded the new recording"
                )
            )


def _accept(result: FlowResult, candidate: Path) -> None:
    """Approved: the candidate becomes the staged recording (`commit` moves it)."""
    result.candidate_path = None
    result.staged_trace = candidate


def commit(results: Sequence[FlowResult]) -> None:
    """Move each staged recording over its trace, in one rename each."""
    for result in results:
        staged, result.staged_trace = result.staged_trace, None
        if staged is None:
            continue
        try:
            if _is_candidate(result, staged):
                os.replace(staged, result.trace_path)
            else:
                commit_staged(staged, result.trace_path)
        except OSError as exc:
            result.error = (
                f"could not move the new recording {staged} over {result.trace_path}: "
                f"{exc.strerror or exc}"
            )
            continue
        result.trace_written = True
        result.trace_sha256 = file_sha256(result.trace_path)


def discard(results: Sequence[FlowResult]) -> None:
    """Remove what was staged and not committed; an approved candidate stays beside its
    trace, where `flowproof record --yes` or a `mv` can still take it."""
    for result in results:
        staged, result.staged_trace = result.staged_trace, None
        if staged is None:
            continue
        if _is_candidate(result, staged):
            result.candidate_path = staged
        else:
            discard_staged(staged)


def _is_candidate(result: FlowResult, staged: Path) -> bool:
    return staged == candidate_path_for(result.trace_path)


def _how_to_accept(result: FlowResult, candidate: Path) -> str:
    trace = result.trace_path
    output = "" if trace == traces.trace_path_for(result.spec_path) else f" -o {trace}"
    return (
        f"re-record not approved (no terminal to ask on): kept {trace}; the new recording is "
        f"{candidate}. Accept it with `flowproof record --yes{output} {result.spec_path}`, or "
        f"review it (`flowproof diff {trace} {candidate}`) and `mv {candidate} {trace}`"
    )
