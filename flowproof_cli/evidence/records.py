"""Run records: `<root>/.flowproof/runs/<id>/report.json`, one per `record` or `run`.

The root is the directory a run was given, or a single spec's folder. A record ties each
verdict to the exact files it judged (the sha256 of the spec, and of the trace read or
written) and carries each control row, so that `flowproof audit` answers from records
alone. It is written once per invocation, by the process the user started (a `-j N` worker
only returns its result), and the newest `KEEP` records are kept.

Ids sort by time: `20261201T121030.123Z-ab12` is the UTC start to the millisecond, then a
random suffix, claimed with an exclusive mkdir, so two runs in one millisecond still get two
records. A record that cannot be written is a warning on stderr, once; the verdict and the
exit code stay what they were.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from flowproof_cli.errors import FlowproofError
from flowproof_cli.mode import Mode
from flowproof_cli.verdict import FlowResult

if TYPE_CHECKING:
    from flowproof_cli.spec.models import FlowSpec

FORMAT = 1
#: The folder of what flowproof leaves behind in a checkout (run records, the JUnit XML).
FOLDER = Path(".flowproof")
RUNS = FOLDER / "runs"
#: Written into FOLDER (as pytest does for its cache): git ignores the folder, so it never
#: shows in `git status`, nor in the git status a coding CLI sends its model.
GITIGNORE = "# Created by flowproof automatically: run records and reports, never committed.\n*\n"
REPORT = "report.json"
KEEP = 10
RUN_ID = re.compile(r"\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{4}")
#: FlowResult.status -> the record's status.
STATUSES = {"passed": "pass", "failed": "fail", "skipped": "skipped", "error": "error"}
_CLAIM_ATTEMPTS = 20


def file_sha256(path: Path) -> str | None:
    """The hex sha256 of a regular file's bytes, or None when it cannot be read. Opened
    without blocking and checked before a byte is read: a FIFO would wait for a writer, a
    device (`/dev/zero`) never end."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                return None
            return hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError:
        return None


def with_evidence(result: FlowResult, spec: FlowSpec, spec_sha256: str | None) -> FlowResult:
    """The result, tied to the spec it judged and carrying its control row (if any)."""
    from flowproof_cli.evidence.controls import control_row  # noqa: PLC0415 (yaml)

    result.spec_sha256 = spec_sha256
    result.control = control_row(spec, result)
    return result


def new_run_id(started: datetime) -> str:
    stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}.{started.microsecond // 1000:03d}Z-{secrets.token_hex(2)}"


def flowproof_folder(root: Path) -> Path:
    """`<root>/.flowproof`, made if missing, with its `.gitignore` (`*`) written if missing,
    also in a folder an older flowproof made. A `.gitignore` that cannot be written costs
    nothing but that: the folder is still used."""
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not os.path.lexists(ignore):
        temporary = folder / f".gitignore.{os.getpid()}.tmp"
        try:
            temporary.write_text(GITIGNORE, encoding="utf-8")
            temporary.replace(ignore)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
    return folder


def runs_dir(root: Path) -> Path:
    return root / RUNS


def run_ids(root: Path) -> list[str]:
    """The ids of the complete records under root, oldest first."""
    try:
        entries = list(runs_dir(root).iterdir())
    except OSError:
        return []
    return sorted(
        entry.name
        for entry in entries
        if RUN_ID.fullmatch(entry.name) and (entry / REPORT).is_file()
    )


class PlannedFlow(Protocol):
    """What a record reads of a planned flow (the runner's `FlowJob`) that never got a
    result: its spec, its trace and the mode, for the flow's error row. A protocol, so
    evidence/ stays below the runner that plans the flows."""

    @property
    def spec_path(self) -> Path: ...

    @property
    def trace_path(self) -> Path: ...

    @property
    def mode(self) -> Mode: ...


class RunRecord:
    """The record of one CLI invocation, written when its block ends:

        with RunRecord(root, jobs) as record:
            record.results = ...   # then print, sys.exit(...)

    Leaving the block normally or by `sys.exit` writes the results; a FlowproofError (a
    single spec that could not run, exit 2) writes an error row for each job without a
    result, then propagates. An interrupt writes nothing: it is no evidence.
    """

    def __init__(
        self, root: Path, jobs: Sequence[PlannedFlow], *, argv: Sequence[str] | None = None
    ) -> None:
        self.root = root
        self.jobs = list(jobs)
        self.results: list[FlowResult] = []
        self.argv = list(argv) if argv is not None else ["flowproof", *sys.argv[1:]]
        self.started = datetime.now(UTC)
        self.path: Path | None = None  # the report.json written, once it is

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            self.write(None)
        elif isinstance(error, SystemExit):
            self.write(error.code if isinstance(error.code, int) else None)
        elif isinstance(error, FlowproofError):
            self._error_rows(str(error))
            self.write(int(error.exit_code))

    def _error_rows(self, message: str) -> None:
        done = {result.spec_path for result in self.results}
        for job in self.jobs:
            if job.spec_path not in done:
                row = FlowResult(job.spec_path.name, job.spec_path, job.mode.value, job.trace_path)
                row.error = message
                self.results.append(row)

    def write(self, exit_code: int | None = None) -> Path | None:
        """Write the record and prune old ones; warn once on stderr if it cannot."""
        try:
            document = self.document(exit_code)
            self.path = _claim(runs_dir(self.root), self.started, document)
            prune(self.root, spare=self.path.parent.name)
        except (OSError, ValueError) as exc:
            sys.stderr.write(
                f"warning: could not write the run record under {runs_dir(self.root)}: "
                f"{_reason(exc)}\n"
            )
            return None
        return self.path

    def document(self, exit_code: int | None = None) -> dict[str, Any]:
        _fill_unloaded_controls(self.results)
        flows = [flow_row(result, self.root) for result in self.results]
        counts = {status: 0 for status in STATUSES.values()}
        for flow in flows:
            counts[flow["status"]] += 1
        finished = datetime.now(UTC)
        return {
            "format": FORMAT,
            "id": None,  # set when the record's directory is claimed
            "argv": self.argv,
            "started_at": _timestamp(self.started),
            "finished_at": _timestamp(finished),
            "exit_code": exit_code if exit_code is not None else _exit_code(counts),
            "flowproof": _version(),
            "os": {
                "system": platform.system(),
                "release": platform.release(),
                "machine": platform.machine(),
            },
            "python": f"{platform.python_version()} ({platform.python_implementation()})",
            "summary": counts,
            "flows": flows,
        }


def flow_row(result: FlowResult, root: Path) -> dict[str, Any]:
    """One flow as the record holds it; paths relative to the record's root."""
    trace = relative_to(result.trace_path, root)
    control = None
    if result.control is not None:
        control = dict(result.control)
        control["evidence"] = {**control.get("evidence", {}), "trace": trace}
    row = {
        "name": result.name,
        "spec": relative_to(result.spec_path, root),
        "mode": result.mode,
        "status": STATUSES[result.status],
        "duration_s": round(result.duration_s, 3),
        "message": _message(result),
        "failures": [failure.to_json() for failure in result.failures],
        "agent_exit_code": result.agent_exit_code,
        "stdout_tail": result.stdout_tail,
        "stderr_tail": result.stderr_tail,
        "model_calls": result.model_calls,
        "recorded_turns": result.recorded_turns,
        "mcp_calls": dict(result.mcp_calls),
        "match_rules": list(result.match_rules),
        "containment": result.containment,
        "spec_sha256": result.spec_sha256 or file_sha256(result.spec_path),
        "trace": trace,
        "trace_sha256": result.trace_sha256,
        "trace_written": result.trace_written,
        "control": control,
    }
    if result.conversation is not None:  # absent for a one-turn flow, as before
        row["conversation"] = [dict(turn) for turn in result.conversation]
    if result.faults:  # absent without faults, as before
        row["faults"] = [dict(fault) for fault in result.faults]
    return row


def relative_to(path: Path, root: Path) -> str:
    """`path` relative to `root` (`../x` when outside it), as a POSIX path."""
    # realpath, not Path.resolve(): a symbolic link loop (a broken trace) raises no error
    return Path(os.path.relpath(os.path.realpath(path), os.path.realpath(root))).as_posix()


def prune(root: Path, keep: int = KEEP, spare: str | None = None) -> None:
    """Remove all but the newest `keep` records (never `spare`, the one just written)."""
    runs = runs_dir(root)
    ids = sorted(entry.name for entry in runs.iterdir() if RUN_ID.fullmatch(entry.name))
    for old in ids[: max(0, len(ids) - keep)]:
        if old != spare:
            shutil.rmtree(runs / old, ignore_errors=True)


def load_run(root: Path, run_id: str) -> dict[str, Any]:
    """A record as written; FlowproofError (exit 2) when it is unreadable or too new."""
    path = runs_dir(root) / run_id / REPORT
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise FlowproofError(f"cannot read the run record {path}: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("flows"), list):
        raise FlowproofError(f"the run record {path} is not a flowproof run record")
    if document.get("format") != FORMAT:
        raise FlowproofError(
            f"the run record {path} has format {document.get('format')!r}; this flowproof "
            f"reads format {FORMAT}. Fix: audit it with the flowproof that wrote it"
        )
    return document


def _claim(runs: Path, started: datetime, document: dict[str, Any]) -> Path:
    """Create a fresh record directory (exclusive) and write report.json into it atomically."""
    runs.mkdir(parents=True, exist_ok=True)
    flowproof_folder(runs.parent.parent)
    for _ in range(_CLAIM_ATTEMPTS):
        run_id = new_run_id(started)
        folder = runs / run_id
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        document["id"] = run_id
        path = folder / REPORT
        temporary = folder / f".{REPORT}.tmp"
        temporary.write_text(
            json.dumps(document, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
        )
        temporary.replace(path)
        return path
    raise FileExistsError(f"no free run id in {runs} after {_CLAIM_ATTEMPTS} attempts")


def _fill_unloaded_controls(results: Sequence[FlowResult]) -> None:
    """A control-bearing spec whose flow errored before its spec loaded still gets a row."""
    from flowproof_cli.evidence.controls import declared_control, unloaded_row  # noqa: PLC0415

    for result in results:
        if result.control is None and result.status == "error":
            declared = declared_control(result.spec_path)
            if declared is not None:
                result.control = unloaded_row(declared, result)


def _message(result: FlowResult) -> str | None:
    if result.status == "failed":
        return "\n".join(result.failure_texts)
    if result.status == "error":
        return result.error
    if result.status == "skipped":
        return result.skipped
    return None


def _exit_code(counts: dict[str, int]) -> int:
    if counts["error"]:
        return 2
    return 1 if counts["fail"] else 0


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _version() -> str:
    try:
        return metadata.version("flowproof")
    except metadata.PackageNotFoundError:
        return "unknown"


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)
