"""`flowproof doctor`: does this agent's model client reach flowproof at all?

Before writing a spec, a user needs to know one thing: when flowproof starts the command with
its usual environment, do model requests arrive at the proxy? The doctor runs the command
once against a proxy that answers every model route with a canned reply (no trace, no
upstream, no key), and reports what arrived where. It shares the flow's environment and
process handling, so what works here works in `record` and `run`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from flowproof_cli.dialects import dialect_named
from flowproof_cli.runner.command import AgentOutcome, resolve_argv, run_agent
from flowproof_cli.runner.environment import (
    agent_environment,
    proxy_handles,
    runtime_handles,
    task_file,
)
from flowproof_cli.runner.termination import cancelled_by_sigterm

if TYPE_CHECKING:
    from flowproof_addons.canned import CannedReplies

DEFAULT_PROMPT = "Say hello."
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Arrival:
    route: str  # "POST /v1/chat/completions"
    dialect: str
    count: int
    provider: str = ""  # which provider's API the request spoke (`Dialect.provider`)


@dataclass
class DoctorReport:
    command: str
    port: int
    outcome: AgentOutcome
    arrivals: list[Arrival] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)  # non-model requests, answered 404

    @property
    def model_requests(self) -> int:
        return sum(arrival.count for arrival in self.arrivals)

    @property
    def proxy_url(self) -> str:
        return proxy_handles(self.port)["proxy_url"]


async def diagnose(
    command: str,
    *,
    prompt: str = DEFAULT_PROMPT,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    canned: CannedReplies | None = None,
) -> DoctorReport:
    """Run the command once against canned replies; it may use `${VAR}` and the handles an
    `agent.command` may (but no MCP ones). AgentStartError, ConfigError propagate (exit 2)."""
    # The proxy engine only here: `flowproof doctor --help` shows the defaults above.
    from flowproof_addons.canned import CannedReplies  # noqa: PLC0415
    from flowproof_addons.guard import RequestGuard  # noqa: PLC0415
    from flowproof_cli.runner.proxy_engine import ProxyEngine  # noqa: PLC0415

    environ = dict(os.environ if environ is None else environ)
    canned = canned or CannedReplies()  # `flowproof init` passes one that keeps the tools
    with cancelled_by_sigterm():
        async with ProxyEngine([RequestGuard(), canned], upstream_tls=False) as proxy:
            port = proxy.port
            with task_file(prompt) as prompt_file:
                handles = runtime_handles(port, prompt, prompt_file=prompt_file)
                argv = resolve_argv(command, environ, handles, where="--agent")
                folder = cwd or Path.cwd()
                env = agent_environment(
                    environ,
                    port=port,
                    prompt=prompt,
                    spec_env={},
                    prompt_file=prompt_file,
                    cwd=folder,
                )
                outcome = await run_agent(argv, env=env, cwd=folder, timeout_s=timeout_s)
    arrivals = [
        Arrival(route, dialect, count, dialect_named(dialect).provider)
        for (route, dialect), count in sorted(canned.model_requests.items())
    ]
    return DoctorReport(command, port, outcome, arrivals, dict(sorted(canned.refused.items())))
