"""What a flow's runner needs from egress containment: the launch, and the report of a url
agent's run (not contained). What the report means for a flow (`assert_no_egress`, the
allow-list warning) is the judge's (runner/judge.py): this package reports facts only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from flowproof_cli.egress.launcher import Launch
from flowproof_cli.egress.policy import Policy
from flowproof_cli.egress.report import Containment, EgressReport

if TYPE_CHECKING:  # the spec is read, never built, here: no run-time edge to spec/
    from flowproof_cli.spec import FlowSpec

NOT_ENGAGED = "the flow declares no allow_egress and no assert_no_egress"
URL_AGENT = "a url agent is a running service that flowproof did not start"


def launch_for(spec: FlowSpec, environ: Mapping[str, str]) -> Launch:
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
