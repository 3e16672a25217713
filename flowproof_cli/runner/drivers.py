"""The two ways to drive an agent, each ending in the same `Driven` summary.

* `command`: flowproof starts the agent with the proxy's address injected into its
  environment, on an ephemeral port, and judges its exit.
* `url`: a service is already running, its model client pointed at the fixed
  `proxy_port`; flowproof binds the proxy there and triggers the service with one POST.

What each driver learns about the run itself (a crash, a timeout, an unreachable service)
and how it explains a run in which no model request arrived differ; everything the proxy
saw is judged the same way afterwards (`runner.judge`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowproof_cli.cassette import CassetteSession
from flowproof_cli.egress import EgressReport
from flowproof_cli.egress import verdicts as egress
from flowproof_cli.mcp.flow import McpFlow
from flowproof_cli.runner.boundaries import Boundaries
from flowproof_cli.runner.command import resolve_argv, run_agent
from flowproof_cli.runner.environment import (
    agent_environment,
    proxy_handles,
    runtime_handles,
    service_wiring_hint,
    wiring_hint,
)
from flowproof_cli.runner.proxy import PortInUseError
from flowproof_cli.runner.url_driver import trigger
from flowproof_cli.spec import FlowSpec


@dataclass
class Driven:
    """What a driver observed, with its explanations ready for the verdict."""

    failure: str | None = None  # the run itself failed: crash, timeout, unreachable service
    no_requests: str = ""  # why no model request may have arrived, and what to do
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    notes: list[str] = field(default_factory=list)
    egress: EgressReport | None = None  # the containment this run ran under, and its report


def _calls_made(session: CassetteSession, recorded: int | None) -> str:
    made = f"it made {session.requests} model call(s)"
    return made if recorded is None else f"{made} of {recorded} recorded"


async def drive_command(
    spec: FlowSpec,
    session: CassetteSession,
    *,
    environ: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    recorded: int | None,
    mcp: McpFlow | None = None,
    user_addons: Sequence[Any] = (),
) -> Driven:
    """Start the agent pointed at a proxy on an ephemeral port; judge how it ended."""
    agent = spec.agent
    boundaries = Boundaries(session, mcp, user_addons)
    async with boundaries.proxy() as proxy:
        await boundaries.attach(proxy)
        mcp_handles = mcp.handles() if mcp is not None else None
        handles = runtime_handles(proxy.port, spec.task_prompt, mcp_handles)
        argv = resolve_argv(agent.command or "", environ, handles)  # a handle is one word
        spec_env = agent.resolved_env(environ, handles)
        env = agent_environment(
            environ,
            port=proxy.port,
            prompt=spec.task_prompt,
            spec_env=spec_env,
            mcp=mcp.environment() if mcp is not None else None,
        )
        launch = egress.launch_for(spec, environ)
        try:
            outcome = await run_agent(argv, env=env, cwd=cwd, timeout_s=timeout_s, launch=launch)
        finally:
            report = launch.finish()  # the process group has ended: stop the supervisor

    driven = Driven(exit_code=outcome.exit_code, stdout=outcome.stdout, stderr=outcome.stderr)
    driven.egress = report
    if outcome.timed_out:
        driven.failure = (
            f"the agent did not finish within {timeout_s:g} s and was killed; "
            f"{_calls_made(session, recorded)}"
        )
    elif outcome.exit_code != 0:
        tail = outcome.stderr_tail()
        when = "before making any model call" if session.requests == 0 else "after its model calls"
        message = f"the agent exited with code {outcome.exit_code} {when}"
        driven.failure = f"{message}; its stderr ends with:\n{tail}" if tail else message
    has = f"; the recording has {recorded}" if recorded is not None else ""
    driven.no_requests = (
        "no model request reached flowproof's proxy: the agent exited 0 without calling "
        f"a model through it (its client ignored the injected base URL){has}. {wiring_hint()}"
    )
    return driven


async def drive_service(
    spec: FlowSpec,
    session: CassetteSession,
    *,
    environ: Mapping[str, str],
    timeout_s: float,
    recorded: int | None,
    mcp: McpFlow | None = None,
    user_addons: Sequence[Any] = (),
) -> Driven:
    """Bind the proxy at the fixed proxy_port, POST the task to the service, await it."""
    agent = spec.agent
    url, port = str(agent.url), int(agent.proxy_port or 0)
    # resolved here, never stored or printed
    headers = agent.resolved_headers(environ, proxy_handles(port))
    boundaries = Boundaries(session, mcp, user_addons)
    proxy = boundaries.proxy(port)
    try:
        await proxy.start()
    except PortInUseError:
        raise PortInUseError(
            port,
            f"proxy_port {port} is already in use on 127.0.0.1 (another flowproof run, or "
            "some other program, listens there). Fix: stop it, or choose another "
            "`proxy_port` in the spec and point the service's model client at "
            "http://127.0.0.1:<that port>/v1",
        ) from None
    try:
        await boundaries.attach(proxy)
        outcome = await trigger(url, spec.task_prompt, headers=headers, timeout_s=timeout_s)
    finally:
        await proxy.stop()

    driven = Driven(stdout=outcome.body, egress=egress.url_report())
    if outcome.error is not None:
        driven.failure = (
            f"could not reach the agent service at {url}: {outcome.error}. Fix: start the "
            f"service first, with its model client pointed at "
            f"{proxy_handles(port)['proxy_url']}"
        )
    elif outcome.timed_out:
        driven.failure = (
            f"the service at {url} did not answer within {timeout_s:g} s; "
            f"{_calls_made(session, recorded)}"
        )
    if outcome.status is not None and not outcome.answered_ok:
        driven.notes.append(
            f"the service at {url} answered the trigger with HTTP {outcome.status}; flowproof "
            "judges the trajectory its model calls made, not that status"
        )
    if outcome.answered_ok:
        why = (
            f"answered HTTP {outcome.status} without calling a model through it (its model "
            "client points elsewhere)"
        )
    else:
        answered = f"answered HTTP {outcome.status}" if outcome.status is not None else "ran"
        why = (
            f"{answered} without calling a model through it (it failed before its first "
            "model call, or its model client points elsewhere)"
        )
        if outcome.body.strip():
            why += f"; it answered: {_clip(outcome.body.strip())}"
    has = f"; the recording has {recorded}" if recorded is not None else ""
    driven.no_requests = (
        f"no model request reached flowproof's proxy on 127.0.0.1:{port}: the service at "
        f"{url} {why}{has}. {service_wiring_hint(port)}"
    )
    return driven


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."
