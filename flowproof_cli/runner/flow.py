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
from pathlib import Path
from typing import cast

from flowproof_cli import trace as traces
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.cassette.upstreams import upstreams_from_environment
from flowproof_cli.errors import TraceError
from flowproof_cli.evidence import secrets as secret_scan
from flowproof_cli.evidence.records import file_sha256
from flowproof_cli.faults.model_calls import ModelCalls
from flowproof_cli.faults.plan import Fault
from flowproof_cli.match.addons import LoadedScript
from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.rules import MatchRules
from flowproof_cli.match.user_code import Raised, SerialThread, addon_budget
from flowproof_cli.mode import Mode
from flowproof_cli.providers import upstream_signers
from flowproof_cli.runner import orphans
from flowproof_cli.runner.conversation_trace import conversation_state, recorded_turns
from flowproof_cli.runner.drivers import Driven, Wiring, drive_command, drive_service
from flowproof_cli.runner.fault_verdicts import check_recorded_faults
from flowproof_cli.runner.flow_setup import FlowSetup, record_command
from flowproof_cli.runner.mcp_servers import McpServers, McpVerdict
from flowproof_cli.runner.run_proxy import RunProxy
from flowproof_cli.runner.termination import cancelled_by_sigterm
from flowproof_cli.spec import FlowSpec
from flowproof_cli.verdict import FlowResult

#: The verdict's module, with the judge, the re-record and the trajectory diff it imports:
#: not imported before the agent's spawn (every flow waits for that), but while the agent
#: runs (`_load_while_the_agent_runs`).
_VERDICT_PHASE = "flowproof_cli.runner.verdict_phase"


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
    record = record_command(spec_path)
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
            from flowproof_cli.runner import verdict_phase  # noqa: PLC0415 (_VERDICT_PHASE)

            result = verdict_phase.observed(
                setup, driven, mcp, duration_s=time.monotonic() - started
            )
            verdict_phase.judged(setup, result, driven, mcp)
            if mode is Mode.RECORD:
                verdict_phase.keep_recording(setup, result, driven, mcp)
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


async def _drive_on(setup: FlowSetup, hub: RunProxy | None) -> tuple[Driven, McpVerdict]:
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
) -> FlowSetup:
    """The checks that fail a flow with exit 2 before any agent runs, then its session."""
    env = dict(os.environ if environ is None else environ)
    spec_path = spec.source_path or Path(f"{spec.name}.flow.yaml")
    if mode is Mode.REPLAY and not trace_path.exists():
        raise TraceError(f"no trace at {trace_path}; record it first: {record_command(spec_path)}")
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
    return FlowSetup(
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


async def _drive(setup: FlowSetup, hub: RunProxy) -> tuple[Driven, McpVerdict]:
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
    """The verdict's module (`_VERDICT_PHASE`) imported once the engine is up: after the
    agent's spawn, beside its own start, and done long before the verdict needs it. An
    engine that did not start is the drive's failure to report, not this one's."""
    try:
        await hub.start()
    except Exception:  # the drive's own wait for the engine raises it again
        return
    importlib.import_module(_VERDICT_PHASE)
