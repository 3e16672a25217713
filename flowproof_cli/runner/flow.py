"""One flow's lifecycle: proxy up, agent driven, proxy down, verdict, trace (record only).

spec -> session (cassette) -> driver (proxy + agent) -> trajectory -> judge -> verdict

SIGTERM cancels the flow like Ctrl-C does, so the drivers' `finally` blocks always end the
agent's process group and close the proxy's port (see `runner.termination`).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from flowproof_cli import trace as traces
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.cassette.upstreams import Upstreams, upstreams_from_environment
from flowproof_cli.errors import TraceError
from flowproof_cli.evidence import secrets as secret_scan
from flowproof_cli.evidence.records import file_sha256
from flowproof_cli.faults.model_calls import ModelCalls
from flowproof_cli.faults.plan import Fault
from flowproof_cli.match.addons import LoadedScript, ScriptAddon
from flowproof_cli.match.agents import preset_version_notes
from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.rules import MatchRules, summarize
from flowproof_cli.match.user_code import Raised, SerialThread, addon_budget
from flowproof_cli.mode import Mode
from flowproof_cli.providers import upstream_signers
from flowproof_cli.runner import orphans
from flowproof_cli.runner.conversation_trace import (
    conversation_state,
    recorded_conversation,
    recorded_turns,
)
from flowproof_cli.runner.drivers import Driven, Wiring, drive_command, drive_service
from flowproof_cli.runner.fault_verdicts import (
    check_recorded_faults,
    fault_outcomes,
    fault_report,
)
from flowproof_cli.runner.mcp_servers import McpServers, McpVerdict
from flowproof_cli.runner.run_proxy import RunProxy
from flowproof_cli.runner.termination import cancelled_by_sigterm
from flowproof_cli.spec import FlowSpec
from flowproof_cli.verdict import FlowResult

#: What only the verdict needs, once the agent has run: not imported before the agent starts
#: (that wait is every flow's), but while it runs (`_load_while_the_agent_runs`), beside the
#: agent's own start on the other core.
_AFTER_THE_AGENT = (
    "flowproof_cli.runner.judge",
    "flowproof_cli.runner.turn_judge",
    "flowproof_cli.runner.tool_warnings",
    "flowproof_cli.runner.rerecord",
    "flowproof_cli.evidence.trajectory_diff",
)


def _record_command(spec_path: Path) -> str:
    return f"flowproof record {spec_path}"


def _blocks(spec: FlowSpec, suite_match: Sequence[Declared], cwd: Path) -> list[Declared]:
    """The suite's `match:` blocks, then the flow's own."""
    own = [spec.match.declared(cwd, "spec")] if spec.match is not None else []
    return [*suite_match, *own]


def _match_rules(
    spec: FlowSpec,
    suite_match: Sequence[Declared],
    cwd: Path,
    environ: Mapping[str, str],
    timeout_s: float,
) -> tuple[MatchRules, list[LoadedScript]]:
    """The suite's rules then the flow's own, and their matcher scripts. A missing or broken
    matcher script (or budget) raises ConfigError here, before the agent starts."""
    blocks = _blocks(spec, suite_match, cwd)
    if not blocks:
        return MatchRules(), []
    budget = addon_budget(environ, timeout_s) if any(block.addons for block in blocks) else None
    return build_rules(blocks, cwd=cwd, home=environ.get("HOME"), addon_budget=budget)


def _open_session(
    spec: FlowSpec,
    mode: Mode,
    trace_path: Path,
    environ: Mapping[str, str],
    rules: MatchRules,
    *,
    spec_path: Path,
    injected: tuple[Fault, ...] = (),
) -> tuple[CassetteSession, traces.Trace | None]:
    faults = ModelCalls((*spec.fault_plan, *injected))
    if mode is Mode.RECORD:
        upstream = upstreams_from_environment(environ)
        session = CassetteSession(
            Mode.RECORD,
            mocks=spec.mocks,
            upstream=upstream,
            rules=rules,
            signers=upstream_signers(environ),
            conversation=conversation_state(spec, None),
            faults=faults,
        )
        return session, None
    trace = traces.load(trace_path)
    recorded_turns(spec, trace, trace_path, spec_path)
    record = _record_command(spec_path)
    check_recorded_faults(spec.fault_plan, trace.faults, trace_path, record)
    session = CassetteSession(
        Mode.REPLAY,
        mocks=spec.mocks,
        recorded=list(trace.turns),
        rules=rules,
        # Recorded under exactly these rules: the stored requests are already as matched.
        recorded_as_matched=trace.match == rules.snapshot(),
        record_command=record,
        conversation=conversation_state(spec, trace),
        faults=faults,
    )
    return session, trace


async def run_flow(
    spec: FlowSpec,
    *,
    mode: Mode,
    trace_path: Path,
    environ: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    suite_match: Sequence[Declared] = (),
    hub: RunProxy | None = None,
    keep_going: bool = False,
    injected: tuple[Fault, ...] = (),
) -> FlowResult:
    """Run one flow and return its verdict. FlowproofError propagates (exit 2).

    `hub` is the run's proxy, shared by every flow of the run; without one, the flow
    starts (and stops) a proxy of its own. A command agent is stopped shortly after a
    replay's first divergence, unless `keep_going` (runner/drivers.py). `injected`: faults
    beyond the spec's, at replay only (`flowproof chaos`), not compared with the trace's."""
    with cancelled_by_sigterm():
        started = time.monotonic()
        prepare = functools.partial(
            _prepare,
            spec,
            mode,
            trace_path,
            environ,
            timeout_s=timeout_s,
            match=suite_match,
            keep_going=keep_going,
            injected=injected,
        )
        setup = await _off_loop(prepare) if _has_addons(spec, suite_match) else prepare()
        try:
            driven, mcp = await _drive_on(setup, hub)
            if setup.session.off_loop is not None:  # what its matcher addons found is judged
                await setup.session.off_loop.settled()
            result = _observed(setup, driven, mcp, duration_s=time.monotonic() - started)
            _judge(setup, result, driven, mcp)
            if mode is Mode.RECORD:
                _keep_recording(setup, result, driven, mcp)
        finally:
            setup.close()
    if mode is Mode.REPLAY:  # the trace judged; a record's, once written (rerecord.commit)
        result.trace_sha256 = file_sha256(trace_path)
    return result


def _has_addons(spec: FlowSpec, suite_match: Sequence[Declared]) -> bool:
    own = spec.match is not None and bool(spec.match.addons)
    return own or any(block.addons for block in suite_match)


async def _off_loop[T](prepare: Callable[[], T]) -> T:
    """A flow with matcher addons is prepared in a thread of its own: its scripts import
    there and may rewrite the recorded requests (each call within its budget), while the
    event loop goes on with the other flows, the signals and the timeouts."""
    thread = SerialThread("flow setup", budget_s=None)
    try:
        return cast(T, await thread.run("setup", prepare))
    except Raised as exc:  # what `_prepare` raises (a FlowproofError), as it raised it
        raise exc.original from None
    finally:
        thread.close()


async def _drive_on(setup: _Setup, hub: RunProxy | None) -> tuple[Driven, McpVerdict]:
    """`_drive` on the run's proxy; without one (a run of one), on a proxy of the flow's
    own, and the run's last orphan sweep."""
    if hub is not None:
        return await _drive(setup, hub)
    adopted_before = orphans.children()
    try:
        async with RunProxy(upstream_tls=setup.mode is Mode.RECORD) as own:
            return await _drive(setup, own)
    finally:
        await asyncio.to_thread(orphans.sweep, adopted_before)


@dataclass(frozen=True)
class _Setup:
    """Everything a flow settles before its agent starts; each step below reads from it."""

    spec: FlowSpec
    mode: Mode
    trace_path: Path
    spec_path: Path
    cwd: Path
    environ: dict[str, str]
    timeout_s: float
    secrets: list[secret_scan.Secret]
    rules: MatchRules
    scripts: list[LoadedScript]  # the matcher scripts: their addon objects join the proxy
    session: CassetteSession
    trace: traces.Trace | None  # the trace replayed; None when recording
    keep_going: bool = False  # the agent runs to its own end after a divergence
    injected: tuple[Fault, ...] = ()  # faults beyond the spec's (chaos)

    @property
    def faults(self) -> tuple[Fault, ...]:
        """Every fault the flow runs with: the spec's, then any injected."""
        return (*self.spec.fault_plan, *self.injected)

    @property
    def user_addons(self) -> list[ScriptAddon]:
        return [addon for script in self.scripts for addon in script.addons]

    def close(self) -> None:
        """The threads of its matcher scripts and of its session's rules end."""
        self.session.close()
        for script in self.scripts:
            script.close()


def _prepare(
    spec: FlowSpec,
    mode: Mode,
    trace_path: Path,
    environ: Mapping[str, str] | None,
    *,
    timeout_s: float | None,
    match: Sequence[Declared],
    keep_going: bool = False,
    injected: tuple[Fault, ...] = (),
) -> _Setup:
    """The checks that fail a flow with exit 2 before any agent runs, then its session."""
    env = dict(os.environ if environ is None else environ)
    spec_path = spec.source_path or Path(f"{spec.name}.flow.yaml")
    if mode is Mode.REPLAY and not trace_path.exists():
        raise TraceError(f"no trace at {trace_path}; record it first: {_record_command(spec_path)}")
    if mode is Mode.RECORD:  # found out now, not once the agent has run
        traces.check_writable(trace_path)
    secrets = secret_scan.resolve_secrets(spec, env, spec.source_path)
    cwd = spec_path.parent if spec.source_path else Path.cwd()
    timeout_s = timeout_s if timeout_s is not None else spec.timeout
    rules, scripts = _match_rules(spec, match, cwd, env, timeout_s)
    try:
        session, trace = _open_session(
            spec, mode, trace_path, env, rules, spec_path=spec_path, injected=injected
        )
    except BaseException:
        for script in scripts:
            script.close()
        raise
    return _Setup(
        spec=spec,
        mode=mode,
        trace_path=trace_path,
        spec_path=spec_path,
        cwd=cwd,
        environ=env,
        timeout_s=timeout_s,
        secrets=secrets,
        rules=rules,
        scripts=scripts,
        session=session,
        trace=trace,
        keep_going=keep_going,
        injected=injected,
    )


async def _drive(setup: _Setup, hub: RunProxy) -> tuple[Driven, McpVerdict]:
    """The flow's MCP servers up, the agent driven through the proxy, the servers down."""
    spec = setup.spec
    mcp = McpServers(
        spec.mcp,
        mode=setup.mode,
        environ=setup.environ,
        cwd=setup.cwd,
        lanes=setup.trace.mcp if setup.trace is not None else None,
        faults=setup.faults,
    )
    loading = asyncio.ensure_future(_load_while_the_agent_runs(hub))
    try:
        mcp.prepare()
        drive = (
            drive_service
            if spec.agent.url is not None
            else functools.partial(drive_command, cwd=setup.cwd, keep_going=setup.keep_going)
        )
        wiring = Wiring(hub, mcp, setup.user_addons)
        driven = await drive(
            spec, setup.session, wiring, environ=setup.environ, timeout_s=setup.timeout_s
        )
        return driven, mcp.verdict(setup.session.conversation)
    finally:
        loading.cancel()
        mcp.close()


async def _load_while_the_agent_runs(hub: RunProxy) -> None:
    """`_AFTER_THE_AGENT` imported once the engine is up (after the agent's spawn, and
    before its first call is answered is no matter: the agent is still importing its SDK).
    An engine that did not start fails the flow elsewhere; the verdict then imports them."""
    try:
        await hub.start()
    except Exception:  # the listener that needs the engine raises it
        return
    for name in _AFTER_THE_AGENT:
        importlib.import_module(name)


def _observed(setup: _Setup, driven: Driven, mcp: McpVerdict, *, duration_s: float) -> FlowResult:
    """The verdict's record of what ran, before anything is judged."""
    from flowproof_cli.runner.tool_warnings import (  # noqa: PLC0415 (_AFTER_THE_AGENT)
        handle_warnings,
        look_alike_warnings,
        unintercepted_tool_warnings,
    )

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


def _judge(setup: _Setup, result: FlowResult, driven: Driven, mcp: McpVerdict) -> None:
    """The run's facts to the judge (before any trace is written: a leak means none is),
    its judgement into the verdict, then every secret value out of the verdict's text."""
    from flowproof_cli.runner.judge import Replayed, judge  # noqa: PLC0415 (_AFTER_THE_AGENT)
    from flowproof_cli.runner.turn_judge import turn_verdicts  # noqa: PLC0415

    spec, session, trace = setup.spec, setup.session, setup.trace
    leaks = secret_scan.find_leaks(
        setup.secrets,
        session,
        trace.mcp if trace is not None else mcp.lanes,
        spec.mcp_mocks if trace is not None else None,
    )
    replayed = (
        Replayed(trace, setup.trace_path, setup.rules, _record_command(setup.spec_path))
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


def _keep_recording(setup: _Setup, result: FlowResult, driven: Driven, mcp: McpVerdict) -> None:
    """Record stages a trace only for a passing flow: a first one, or a reviewed
    replacement (runner/rerecord.py); the command moves it into place with the verdict."""
    from flowproof_cli.evidence.trajectory_diff import intent_of  # noqa: PLC0415 (_AFTER_THE_AGENT)
    from flowproof_cli.runner.rerecord import place_recording  # noqa: PLC0415

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
