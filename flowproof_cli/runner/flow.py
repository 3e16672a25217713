"""One flow's lifecycle: proxy up, agent driven, proxy down, verdict, trace (record only).

spec -> session (cassette) -> driver (proxy + agent) -> trajectory -> judge -> verdict

SIGTERM cancels the flow like Ctrl-C does, so the drivers' `finally` blocks always end the
agent's process group and close the proxy's port (see `runner.termination`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flowproof_cli import trace as traces
from flowproof_cli.cassette import CassetteSession, Mode
from flowproof_cli.egress import EgressReport
from flowproof_cli.egress import verdicts as egress
from flowproof_cli.errors import TraceError
from flowproof_cli.evidence import secrets as secret_scan
from flowproof_cli.evidence.records import file_sha256
from flowproof_cli.evidence.trajectory_diff import intent_of
from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.rules import MatchRules, summarize
from flowproof_cli.mcp.flow import McpFlow
from flowproof_cli.runner.drivers import drive_command, drive_service
from flowproof_cli.runner.judge import judge
from flowproof_cli.runner.rerecord import place_recording
from flowproof_cli.runner.termination import cancelled_by_sigterm
from flowproof_cli.runner.tool_warnings import handle_warnings, unintercepted_tool_warnings
from flowproof_cli.runner.upstream import upstream_from_environment
from flowproof_cli.runner.verdict import FlowResult
from flowproof_cli.spec import FlowSpec


def _record_command(spec_path: Path) -> str:
    return f"flowproof record {spec_path}"


def _match_rules(
    spec: FlowSpec, suite_match: Sequence[Declared], cwd: Path, environ: Mapping[str, str]
) -> tuple[MatchRules, list[Any]]:
    """The suite's rules then the flow's own, and the addon objects of their scripts.
    A missing or broken matcher script raises ConfigError here, before the agent starts."""
    blocks = list(suite_match)
    if spec.match is not None:
        blocks.append(spec.match.declared(cwd, "spec"))
    if not blocks:
        return MatchRules(), []
    rules, scripts = build_rules(blocks, cwd=cwd, home=environ.get("HOME"))
    return rules, [addon for script in scripts for addon in script.addons]


def _open_session(
    spec: FlowSpec, mode: Mode, trace_path: Path, environ: Mapping[str, str], rules: MatchRules
) -> tuple[CassetteSession, traces.Trace | None]:
    if mode is Mode.RECORD:
        upstream = upstream_from_environment(environ)
        session = CassetteSession(Mode.RECORD, mocks=spec.mocks, upstream=upstream, rules=rules)
        return session, None
    trace = traces.load(trace_path)
    session = CassetteSession(
        Mode.REPLAY,
        mocks=spec.mocks,
        recorded=list(trace.turns),
        rules=rules,
        # Recorded under exactly these rules: the stored requests are already as matched.
        recorded_as_matched=trace.match == rules.snapshot(),
    )
    return session, trace


def _snapshot_notes(
    spec: FlowSpec, trace: traces.Trace, rules: MatchRules, spec_path: Path
) -> list[str]:
    """A failing replay whose mocks or match rules moved since recording says so."""
    changed = []
    if trace.mocks != dict(spec.mocks):
        changed.append("the spec's tools: mocks differ from the ones")
    if trace.match != rules.snapshot():
        changed.append("the match rules in force differ from the ones")
    return [
        f"{what} snapshotted in the trace; re-record with `{_record_command(spec_path)}` if "
        "that change is intended"
        for what in changed
    ]


def _judge_egress(result: FlowResult, spec: FlowSpec, report: EgressReport) -> None:
    """The tier, the report, `assert_no_egress` and, for the run record, whether it could
    certify at all and what THIS run refused (never what a trace recorded elsewhere holds)."""
    result.containment = report.containment.line
    result.egress_report = report.stderr_lines()
    result.notes.extend(egress.notes(spec, report))
    result.failures.extend(egress.failures(spec, report))
    result.capability_error = egress.cannot_certify(spec, report)
    if report.containment.enforced:
        result.egress_blocked = report.trace_section()


async def run_flow(
    spec: FlowSpec,
    *,
    mode: Mode,
    trace_path: Path,
    environ: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    suite_match: Sequence[Declared] = (),
) -> FlowResult:
    """Run one flow and return its verdict. FlowproofError propagates (exit 2)."""
    with cancelled_by_sigterm():
        result = await _run_flow(
            spec,
            mode=mode,
            trace_path=trace_path,
            environ=environ,
            timeout_s=timeout_s,
            suite_match=suite_match,
        )
    if mode is Mode.REPLAY or result.trace_written:  # the trace judged: read, or written
        result.trace_sha256 = file_sha256(trace_path)
    return result


async def _run_flow(
    spec: FlowSpec,
    *,
    mode: Mode,
    trace_path: Path,
    environ: Mapping[str, str] | None,
    timeout_s: float | None,
    suite_match: Sequence[Declared],
) -> FlowResult:
    environ = dict(os.environ if environ is None else environ)
    spec_path = spec.source_path or Path(f"{spec.name}.flow.yaml")
    result = FlowResult(spec.name, spec_path, mode.value, trace_path)
    started = time.monotonic()
    if mode is Mode.REPLAY and not trace_path.exists():
        raise TraceError(f"no trace at {trace_path}; record it first: {_record_command(spec_path)}")
    secrets = secret_scan.resolve_secrets(spec, environ, spec.source_path)  # exit 2 up front
    cwd = spec_path.parent if spec.source_path else Path.cwd()
    rules, user_addons = _match_rules(spec, suite_match, cwd, environ)
    session, trace = _open_session(spec, mode, trace_path, environ, rules)
    timeout = timeout_s if timeout_s is not None else spec.timeout
    recorded = len(session.recorded) if mode is Mode.REPLAY else None
    mcp = McpFlow(
        spec.mcp,
        mode=mode.value,
        environ=environ,
        cwd=cwd,
        lanes=trace.mcp if trace is not None else None,
    )
    try:
        mcp.prepare()
        if spec.agent.url is not None:
            driven = await drive_service(
                spec,
                session,
                environ=environ,
                timeout_s=timeout,
                recorded=recorded,
                mcp=mcp,
                user_addons=user_addons,
            )
        else:
            driven = await drive_command(
                spec,
                session,
                environ=environ,
                cwd=cwd,
                timeout_s=timeout,
                recorded=recorded,
                mcp=mcp,
                user_addons=user_addons,
            )
        mcp_verdict = mcp.verdict()
    finally:
        mcp.close()

    result.duration_s = time.monotonic() - started
    result.model_calls = session.requests
    result.mcp_calls = mcp_verdict.per_server
    result.recorded_turns = len(session.recorded)
    result.agent_exit_code = driven.exit_code
    result.stdout_tail = driven.stdout
    result.stderr_tail = driven.stderr
    result.match_rules = [usage.to_json() for usage in rules.report()]
    result.notes.extend(summarize(rules))
    result.notes.extend(unintercepted_tool_warnings(spec))
    result.notes.extend(handle_warnings(spec))
    result.notes.extend(driven.notes)
    result.failures = judge(
        spec, session=session, driven=driven, mode=mode, environ=environ, mcp=mcp_verdict
    )
    result.divergence = session.divergence.to_json() if session.divergence else None
    if driven.egress is not None:
        _judge_egress(result, spec, driven.egress)
    secret_scan.judge_leaks(  # before any trace is written: a leak means none is
        result,
        secrets,
        session,
        lanes=trace.mcp if trace is not None else mcp_verdict.lanes,
        mocks=spec.mcp_mocks if trace is not None else None,
    )
    if result.failures and trace is not None:
        result.notes.extend(_snapshot_notes(spec, trace, rules, spec_path))
    if mode is Mode.RECORD:
        if result.failures:
            result.notes.append("no trace written (record writes a trace only for a passing flow)")
        else:  # a first trace, or a reviewed replacement (runner/rerecord.py)
            place_recording(
                trace_path,
                traces.Trace(
                    flow=spec.name,
                    turns=session.recorded,
                    mocks=dict(spec.mocks),
                    match=rules.snapshot(),
                    egress_blocked=driven.egress.trace_section() if driven.egress else [],
                    mcp=mcp_verdict.lanes,
                ),
                intent_of(spec),
                result,
                # The old trace may predate the spec's secrets: its values are redacted first.
                scrub=(lambda value: secret_scan.redact_json(value, secrets)) if secrets else None,
            )
    return result
