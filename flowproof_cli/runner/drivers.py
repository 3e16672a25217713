"""The two ways to drive an agent, each ending in the same `Driven` summary.

* `command`: flowproof starts the agent with the proxy's address injected into its
  environment, on an ephemeral port, and judges its exit.
* `url`: a service is already running, its model client pointed at the fixed
  `proxy_port`; flowproof binds the proxy there and triggers the service with one POST.

What each driver learns about the run itself (a crash, a timeout, an unreachable service)
differs; it reports that, and for a url agent how the service answered the trigger. The
judge (`runner.judge`) words everything else, such as a run in which no model request
arrived, from those facts and from what the proxy saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowproof_cli.cassette import CassetteSession
from flowproof_cli.egress import EgressReport
from flowproof_cli.egress import verdicts as egress
from flowproof_cli.errors import ConfigError, PortInUseError
from flowproof_cli.mode import Mode
from flowproof_cli.runner.command import (
    DIVERGENCE_GRACE_S,
    AgentOutcome,
    resolve_argv,
    run_agent,
)
from flowproof_cli.runner.conversation import (
    TurnOutcome,
    conversation_of,
    converse_service,
    unbuffered,
)
from flowproof_cli.runner.environment import (
    agent_environment,
    prompt_note,
    proxy_handles,
    refuse_record_key,
    runtime_handles,
    task_file,
)
from flowproof_cli.runner.mcp_servers import McpServers
from flowproof_cli.runner.run_proxy import RunProxy
from flowproof_cli.runner.url_driver import TriggerOutcome, trigger
from flowproof_cli.spec import FlowSpec
from flowproof_cli.spec.fields import HEADER_FIX, header_problem
from flowproof_cli.spec.variables import find_variables


@dataclass(frozen=True)
class Service:
    """A url agent: where it listens, the proxy port its model client must use, and how it
    answered the trigger."""

    url: str
    proxy_port: int
    answer: TriggerOutcome


@dataclass
class Driven:
    """What a driver observed: facts for the judge, not messages written for it."""

    failure: str | None = None  # the run itself failed: crash, timeout, unreachable service
    exit_code: int | None = None
    #: `failure` is only that the agent exited non-zero: with an `assert: exit code` step
    #: the judge leaves that exit to the step.
    exit_failure: bool = False
    stdout: str = ""
    stderr: str = ""
    #: The agent's own stdout then stderr, whole; None for a url agent (no process here).
    output: str | None = None
    notes: list[str] = field(default_factory=list)
    egress: EgressReport | None = None  # the containment this run ran under, and its report
    service: Service | None = None  # a url agent's trigger; None for a command agent
    turns: list[TurnOutcome] = field(default_factory=list)  # a conversation's, as they went
    failure_turn: int | None = None  # the conversation turn `failure` is about, if one


def _spec_name(spec: FlowSpec) -> str:
    return str(spec.source_path) if spec.source_path else spec.name


def stopped_note(grace_s: float = DIVERGENCE_GRACE_S) -> str:
    """Why an agent that went on after the divergence was ended, and how to let it run."""
    return (
        f"agent stopped {grace_s:g} s after the divergence (more requests cannot change the "
        "verdict; --keep-going to let it run)"
    )


@contextlib.contextmanager
def _settled_by_divergence(
    session: CassetteSession, keep_going: bool
) -> Iterator[asyncio.Event | None]:
    """The event a replay's first divergence sets (None at record, or with `keep_going`):
    once set, `run_agent` gives the agent its grace, then stops it."""
    if session.mode is not Mode.REPLAY or keep_going:
        yield None
        return
    settled = asyncio.Event()
    loop = asyncio.get_running_loop()

    def diverged() -> None:  # wherever the session answers: thread-safe either way
        loop.call_soon_threadsafe(settled.set)

    session.on_divergence = diverged
    try:
        yield settled
    finally:
        session.on_divergence = None


def _calls_made(session: CassetteSession) -> str:
    made = f"it made {session.requests} model call(s)"
    if session.mode is Mode.RECORD:
        return made
    return f"{made} of {len(session.recorded)} recorded"


@dataclass(frozen=True)
class Wiring:
    """What a driver opens its flow's listeners with: the run's proxy, the flow's MCP
    servers and its matcher addons."""

    hub: RunProxy
    mcp: McpServers | None = None
    user_addons: Sequence[Any] = ()

    def listen(self, session: CassetteSession, port: int = 0) -> AbstractAsyncContextManager[int]:
        return self.hub.listen(session, self.mcp, self.user_addons, port=port)


async def drive_command(
    spec: FlowSpec,
    session: CassetteSession,
    wiring: Wiring,
    *,
    environ: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    keep_going: bool = False,
) -> Driven:
    """Start the agent pointed at its own listener of the run's proxy; report how it ended.
    In a replay, the first divergence leaves the agent `DIVERGENCE_GRACE_S` to exit, then
    it is stopped (unless `keep_going`)."""
    prompt = spec.task_prompt
    with task_file(prompt) as prompt_file:
        async with wiring.listen(session) as port:
            handles = runtime_handles(
                port,
                prompt,
                wiring.mcp.handles() if wiring.mcp is not None else None,
                prompt_file=prompt_file,
            )
            argv = resolve_argv(spec.agent.command or "", environ, handles)  # a handle: one word
            spec_env = spec.agent.resolved_env(environ, handles)
            refuse_record_key(environ, _spec_name(spec), argv=argv, env=spec_env)
            env = agent_environment(
                environ,
                port=port,
                prompt=prompt,
                spec_env=spec_env,
                mcp=wiring.mcp.environment() if wiring.mcp is not None else None,
                prompt_file=prompt_file,
                cwd=cwd,
            )
            dialogue = conversation_of(spec, session)
            env = unbuffered(env) if dialogue is not None else env
            launch = egress.launch_for(spec, environ)
            try:
                with _settled_by_divergence(session, keep_going) as settled:
                    outcome = await run_agent(
                        argv,
                        env=env,
                        cwd=cwd,
                        timeout_s=timeout_s,
                        launch=launch,
                        settled=settled,
                        dialogue=dialogue,
                    )
            finally:
                report = launch.finish()  # the process group has ended: stop the supervisor

    driven = _driven(outcome, session, timeout_s)
    driven.egress = report
    driven.turns = dialogue.turns if dialogue is not None else []
    note = prompt_note(prompt)
    if note is not None:
        driven.notes.append(note)
    return driven


def _driven(outcome: AgentOutcome, session: CassetteSession, timeout_s: float) -> Driven:
    """How the agent's run ended, as facts for the judge."""
    driven = Driven(
        exit_code=outcome.exit_code,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        output=outcome.output,
    )
    if outcome.stopped:  # the divergence is the verdict; the stop is no failure of its own
        driven.notes.append(stopped_note())
    elif outcome.conversation_problem is not None:
        tail = outcome.stderr_tail() if outcome.exit_code else ""
        said = f"; its stderr ends with:\n{tail}" if tail else ""
        driven.failure = f"{outcome.conversation_problem}; {_calls_made(session)}{said}"
        driven.failure_turn = outcome.open_turn
    elif outcome.timed_out:
        driven.failure = (
            f"the agent did not finish within {timeout_s:g} s and was killed; "
            f"{_calls_made(session)}"
        )
    elif outcome.exit_code != 0:
        tail = outcome.stderr_tail()
        when = "before making any model call" if session.requests == 0 else "after its model calls"
        message = f"the agent exited with code {outcome.exit_code} {when}"
        driven.failure = f"{message}; its stderr ends with:\n{tail}" if tail else message
        driven.exit_failure = True
    return driven


async def drive_service(
    spec: FlowSpec,
    session: CassetteSession,
    wiring: Wiring,
    *,
    environ: Mapping[str, str],
    timeout_s: float,
) -> Driven:
    """Listen at the fixed proxy_port, POST the task to the service, await it."""
    agent = spec.agent
    url, port = str(agent.url), int(agent.proxy_port or 0)
    # resolved here, never stored or printed
    headers = agent.resolved_headers(environ, proxy_handles(port))
    refuse_record_key(environ, _spec_name(spec), headers=headers)
    for name, value in headers.items():
        problem = header_problem(name, value)
        if problem is not None:  # a `${VAR}` brought it: name the variables, not the value
            variables = ", ".join(find_variables(agent.headers[name]))
            raise ConfigError(
                f"{_spec_name(spec)}: agent.headers.{name} resolves to a value that cannot be "
                f"sent: {problem} (it comes from {variables}). {HEADER_FIX}"
            )
    turns: list[TurnOutcome] = []
    async with contextlib.AsyncExitStack() as stack:
        await _listen_at_proxy_port(stack, wiring.listen(session, port), port)
        if spec.is_conversation:
            post = functools.partial(trigger, url, headers=headers, timeout_s=timeout_s)
            answer = await converse_service(spec, session, post, turns)
        else:
            answer = await trigger(url, spec.task_prompt, headers=headers, timeout_s=timeout_s)
    service = Service(url, port, answer)
    driven = Driven(stdout=answer.body, egress=egress.url_report(), service=service, turns=turns)
    driven.failure = _service_failure(service, session, timeout_s)
    if answer.status is not None and not answer.answered_ok and not turns:
        driven.notes.append(
            f"the service at {url} answered the trigger with HTTP {answer.status}; flowproof "
            "judges the trajectory its model calls made, not that status"
        )
    return driven


async def _listen_at_proxy_port(
    stack: contextlib.AsyncExitStack, listening: AbstractAsyncContextManager[int], port: int
) -> None:
    """Listen on the spec's fixed port until `stack` closes; a taken port names the key."""
    try:
        await stack.enter_async_context(listening)
    except PortInUseError as exc:
        if exc.port != port:  # an MCP server's port: its own message says so
            raise
        raise PortInUseError(
            port,
            f"proxy_port {port} is already in use on 127.0.0.1 (another flowproof run, or "
            "some other program, listens there). Fix: stop it, or choose another "
            "`proxy_port` in the spec and point the service's model client at "
            "http://127.0.0.1:<that port>/v1",
        ) from None


def _service_failure(service: Service, session: CassetteSession, timeout_s: float) -> str | None:
    """The service could not be reached, or did not answer in time."""
    answer, url = service.answer, service.url
    if answer.error is not None:
        return (
            f"could not reach the agent service at {url}: {answer.error}. Fix: start the "
            f"service first, with its model client pointed at "
            f"{proxy_handles(service.proxy_port)['proxy_url']}"
        )
    if answer.timed_out:
        return f"the service at {url} did not answer within {timeout_s:g} s; {_calls_made(session)}"
    return None
