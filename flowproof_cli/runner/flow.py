"""One flow's lifecycle: proxy up, agent run, proxy down, verdict, trace (record only).

spec -> session (cassette) -> proxy -> agent -> trajectory -> assertions -> verdict
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from flowproof_addons.guard import RequestGuard
from flowproof_addons.model import ModelBoundary
from flowproof_cli import trace as traces
from flowproof_cli.assertions import evaluate
from flowproof_cli.cassette import CassetteSession, Mode
from flowproof_cli.errors import TraceError
from flowproof_cli.runner.command import AgentOutcome, run_agent, split_command
from flowproof_cli.runner.environment import agent_environment, proxy_handles, wiring_hint
from flowproof_cli.runner.proxy import ProxyHost
from flowproof_cli.runner.upstream import upstream_from_environment
from flowproof_cli.runner.verdict import FlowResult
from flowproof_cli.spec import FlowSpec, resolve_variables


def _record_command(spec_path: Path) -> str:
    return f"flowproof record {spec_path}"


def _open_session(
    spec: FlowSpec, mode: Mode, trace_path: Path, environ: Mapping[str, str]
) -> tuple[CassetteSession, traces.Trace | None]:
    if mode is Mode.RECORD:
        upstream = upstream_from_environment(environ)
        return CassetteSession(Mode.RECORD, mocks=spec.mocks, upstream=upstream), None
    trace = traces.load(trace_path)
    return CassetteSession(Mode.REPLAY, mocks=spec.mocks, recorded=list(trace.turns)), trace


async def run_flow(
    spec: FlowSpec,
    *,
    mode: Mode,
    trace_path: Path,
    environ: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> FlowResult:
    """Run one flow and return its verdict. FlowproofError propagates (exit 2)."""
    environ = dict(os.environ if environ is None else environ)
    spec_path = spec.source_path or Path(f"{spec.name}.flow.yaml")
    result = FlowResult(spec.name, spec_path, mode.value, trace_path)
    started = time.monotonic()
    if mode is Mode.REPLAY and not trace_path.exists():
        raise TraceError(f"no trace at {trace_path}; record it first: {_record_command(spec_path)}")
    session, trace = _open_session(spec, mode, trace_path, environ)
    timeout = timeout_s if timeout_s is not None else spec.timeout
    argv = split_command(spec.agent.resolved_command(environ))
    cwd = spec_path.parent if spec.source_path else Path.cwd()

    boundary = ModelBoundary()
    async with ProxyHost([RequestGuard(), boundary]) as proxy:
        boundary.sessions[proxy.port] = session
        handles = proxy_handles(proxy.port)
        spec_env = {
            name: resolve_variables(value, environ, handles=handles)
            for name, value in spec.agent.env.items()
        }
        env = agent_environment(
            environ, port=proxy.port, prompt=spec.task_prompt, spec_env=spec_env
        )
        outcome = await run_agent(argv, env=env, cwd=cwd, timeout_s=timeout)

    result.duration_s = time.monotonic() - started
    result.model_calls = session.requests
    result.recorded_turns = len(session.recorded)
    result.agent_exit_code = outcome.exit_code
    result.stdout_tail = outcome.stdout
    result.stderr_tail = outcome.stderr
    result.failures = _judge(
        spec, session=session, outcome=outcome, mode=mode, timeout=timeout, environ=environ
    )
    if result.failures and trace is not None and trace.mocks != dict(spec.mocks):
        result.notes.append(
            "the spec's tools: mocks differ from the ones snapshotted in the trace; "
            f"re-record with `{_record_command(spec_path)}` if that change is intended"
        )
    if mode is Mode.RECORD:
        if result.failures:
            result.notes.append("no trace written (record writes a trace only for a passing flow)")
        else:
            traces.save(
                trace_path,
                traces.Trace(flow=spec.name, turns=session.recorded, mocks=dict(spec.mocks)),
            )
            result.trace_written = True
    return result


def _judge(
    spec: FlowSpec,
    *,
    session: CassetteSession,
    outcome: AgentOutcome,
    mode: Mode,
    timeout: float,
    environ: Mapping[str, str],
) -> list[str]:
    """Failures, most fundamental first; assertions only once the run itself is sound."""
    recorded = len(session.recorded)
    if session.errors:
        return list(dict.fromkeys(session.errors))
    if session.divergence is not None:
        return [f"divergence at {session.divergence.message}"]
    if outcome.timed_out:
        made = f"it made {session.requests} model call(s)"
        if mode is Mode.REPLAY:
            made += f" of {recorded} recorded"
        return [f"the agent did not finish within {timeout:g} s and was killed; {made}"]
    if outcome.exit_code != 0:
        tail = outcome.stderr_tail()
        when = "before making any model call" if session.requests == 0 else "after its model calls"
        message = f"the agent exited with code {outcome.exit_code} {when}"
        return [f"{message}; its stderr ends with:\n{tail}" if tail else message]
    if session.requests == 0:
        has = f"; the recording has {recorded}" if mode is Mode.REPLAY else ""
        return [
            "no model request reached flowproof's proxy: the agent exited 0 without calling "
            f"a model through it (its client ignored the injected base URL){has}. {wiring_hint()}"
        ]
    if mode is Mode.REPLAY and len(session.served) != recorded:
        unused = sorted(set(range(recorded)) - set(session.served))
        turns = ", ".join(str(position + 1) for position in unused)
        return [
            f"the agent made {session.requests} model call(s), the recording has {recorded} "
            f"(turn(s) never requested: {turns})"
        ]
    failures = evaluate(spec, session.trajectory(), environ)
    return [
        f"{failure.message} (step at line {failure.step_line})"
        if failure.step_line
        else failure.message
        for failure in failures
    ]
