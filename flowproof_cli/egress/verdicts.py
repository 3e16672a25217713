"""What a flow's runner needs from egress containment: the launch, and the report of a url
agent's run (not contained). What the report means for a flow (`assert_no_egress`, the
allow-list warning) is the judge's (runner/judge.py): this package reports facts only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from flowproof_cli.egress.launcher import Launch
from flowproof_cli.egress.policy import Policy
from flowproof_cli.egress.report import Containment, EgressReport

NOT_ENGAGED = "the flow declares no allow_egress and no assert_no_egress"
URL_AGENT = "a url agent is a running service that flowproof did not start"


class EgressAgent(Protocol):
    """What the launch reads of a spec's `agent:` (spec.AgentSpec): its `allow_egress`
    entries and how an entry's `${VAR}` resolves. The spec is read, never built, here, so
    egress/ stays below spec/."""

    @property
    def allow_egress(self) -> Sequence[str]: ...

    def resolved_egress_host(self, host: str, environ: Mapping[str, str]) -> str: ...


class EgressFlow(Protocol):
    """What the launch reads of a flow (spec.FlowSpec): whether it engages egress, and its
    agent."""

    @property
    def engages_egress(self) -> bool: ...

    @property
    def agent(self) -> EgressAgent: ...


def launch_for(spec: EgressFlow, environ: Mapping[str, str]) -> Launch:
    """The launch of a command agent: contained when the flow engages egress and this host
    can contain it, passed through (with the reason) otherwise. Resolves `${VAR}` entries and
    pins hostnames now, at run start."""
    if not spec.engages_egress:
        return Launch.prepare(reason=NOT_ENGAGED)
    agent = spec.agent
    policy = Policy.from_entries(
        agent.allow_egress, substitute=lambda host: agent.resolved_egress_host(host, environ)
    )
    return Launch.prepare(policy)


def url_report() -> EgressReport:
    return EgressReport(Containment(False, URL_AGENT))
