"""A flow's verdict, once its agent has run: what ran (`observed`), the judgement
(`judged`) and, for a passing record, the trace kept (`keep_recording`).

Only the verdict needs this module and what it imports, so `runner/flow.py` imports it
while the agent runs, beside the agent's own start, and not before the agent's spawn,
which every flow waits for (pinned by tests/e2e/test_start_budget.py)."""

from __future__ import annotations

from flowproof_cli import trace as traces
from flowproof_cli.cassette.upstreams import Upstreams
from flowproof_cli.evidence import secrets as secret_scan
from flowproof_cli.evidence.trajectory_diff import intent_of
from flowproof_cli.match.agents import preset_version_notes
from flowproof_cli.match.rules import summarize
from flowproof_cli.runner.conversation_trace import recorded_conversation
from flowproof_cli.runner.drivers import Driven
from flowproof_cli.runner.fault_verdicts import fault_outcomes, fault_report
from flowproof_cli.runner.flow_setup import FlowSetup, record_command
from flowproof_cli.runner.judge import Replayed, judge
from flowproof_cli.runner.mcp_servers import McpVerdict
from flowproof_cli.runner.rerecord import place_recording
from flowproof_cli.runner.tool_warnings import (
    handle_warnings,
    look_alike_warnings,
    unintercepted_tool_warnings,
)
from flowproof_cli.runner.turn_judge import turn_verdicts
from flowproof_cli.verdict import FlowResult


def observed(setup: FlowSetup, driven: Driven, mcp: McpVerdict, *, duration_s: float) -> FlowResult:
    """The verdict's record of what ran, before anything is judged."""
    session, rules = setup.session, setup.rules
    result = FlowResult(setup.spec.name, setup.spec_path, setup.mode.value, setup.trace_path)
    result.duration_s = duration_s
    result.model_calls = session.requests
    result.mcp_calls = mcp.per_server
    result.recorded_turns = len(session.recorded)
    result.agent_exit_code = driven.exit_code
    result.stdout_tail = driven.stdout
    result.stderr_tail = driven.stderr
    result.match_rules = [usage.to_json() for usage in rules.report()]
    if isinstance(session.upstream, Upstreams):  # a misspelt provider variable, ...
        result.notes.extend(session.upstream.notes)
    result.notes.extend(summarize(rules))
    result.notes.extend(preset_version_notes(rules, session.agents.seen))
    lanes = setup.trace.mcp if setup.trace is not None else mcp.lanes
    warnings = unintercepted_tool_warnings(setup.spec, turns=session.recorded, lanes=lanes)
    result.notes.extend(warnings)
    result.notes.extend(handle_warnings(setup.spec))
    result.notes.extend(look_alike_warnings(setup.spec))
    result.notes.extend(driven.notes)
    result.notes.extend(dict.fromkeys(session.notes))  # each said once, however often it held
    result.divergence = session.divergence.to_json() if session.divergence else None
    applied, unapplicable = fault_outcomes(session.faults, mcp)
    result.faults = fault_report(setup.faults, applied, unapplicable)
    return result


def judged(setup: FlowSetup, result: FlowResult, driven: Driven, mcp: McpVerdict) -> None:
    """The run's facts to the judge (before any trace is written: a leak means none is),
    its judgement into the verdict, then every secret value out of the verdict's text."""

    spec, session, trace = setup.spec, setup.session, setup.trace
    leaks = secret_scan.find_leaks(
        setup.secrets,
        session,
        trace.mcp if trace is not None else mcp.lanes,
        spec.mcp_mocks if trace is not None else None,
    )
    replayed = (
        Replayed(trace, setup.trace_path, setup.rules, record_command(setup.spec_path))
        if trace is not None
        else None
    )
    judgement = judge(
        spec,
        session=session,
        driven=driven,
        mode=setup.mode,
        environ=setup.environ,
        mcp=mcp,
        egress=driven.egress,
        leaks=leaks,
        replayed=replayed,
        faults=setup.faults,
    )
    result.failures = judgement.failures
    result.notes.extend(judgement.notes)
    result.containment = judgement.containment
    result.egress_report = judgement.egress_report
    result.capability_error = judgement.capability_error
    result.egress_blocked = judgement.egress_blocked
    secret_scan.redact_result(result, setup.secrets)
    if session.conversation is not None:
        result.conversation = turn_verdicts(session, driven.turns, result.failures)


def keep_recording(setup: FlowSetup, result: FlowResult, driven: Driven, mcp: McpVerdict) -> None:
    """Record stages a trace only for a passing flow: a first one, or a reviewed
    replacement (runner/rerecord.py); the command moves it into place with the verdict."""

    if result.failures:
        result.notes.append("no trace written (record writes a trace only for a passing flow)")
        return
    spec, secrets = setup.spec, setup.secrets
    recording = traces.Trace(
        flow=spec.name,
        turns=setup.session.recorded,
        mocks=dict(spec.mocks),
        match=setup.rules.snapshot(),
        egress_blocked=driven.egress.trace_section() if driven.egress else [],
        mcp=mcp.lanes,
        conversation=recorded_conversation(setup.session, driven.turns),
        faults=spec.fault_plan,
    )
    # The old trace may predate the spec's secrets: its values are redacted first.
    scrub = (lambda value: secret_scan.redact_json(value, secrets)) if secrets else None
    place_recording(setup.trace_path, recording, intent_of(spec), result, scrub=scrub)
