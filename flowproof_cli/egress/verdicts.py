"""What a flow's runner needs from egress containment: the launch, the tier of a run that is
not contained, the `assert_no_egress` verdict and the allow-list warning."""

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


def _line(spec: FlowSpec) -> str:
    lines = [step.line for step in spec.steps if step.kind == "assert_no_egress"]
    return f" (step at line {lines[0]})" if lines and lines[0] is not None else ""


def cannot_certify(spec: FlowSpec, report: EgressReport) -> str | None:
    """Why `assert_no_egress` cannot certify this run (it was not contained), or None: the
    flag a control row turns into `capability-error`, rather than a plain fail."""
    if not spec.asserts_no_egress or report.containment.enforced:
        return None
    return report.containment.reason or "not contained"


def failures(spec: FlowSpec, report: EgressReport) -> list[str]:
    """`assert_no_egress`: a capability claim, never vacuous."""
    if not spec.asserts_no_egress:
        return []
    reason = cannot_certify(spec, report)
    if reason is not None:
        return [f"assert_no_egress: cannot certify: {reason}{_line(spec)}"]
    if not report.blocked:
        return []
    attempts = ", ".join(
        f"{item.attempt} ({item.via} at {item.at_ms}ms)"
        for item in sorted(report.blocked, key=lambda blocked: blocked.at_ms)
    )
    count = len(report.blocked)
    return [
        f"assert_no_egress: the agent attempted {count} undeclared destination(s): "
        f"{attempts}{_line(spec)}"
    ]


def notes(spec: FlowSpec, report: EgressReport) -> list[str]:
    """The warning for a declaration that restricted nothing, naming the step to add."""
    if not spec.agent.declares_egress or spec.asserts_no_egress:
        return []
    if report.containment.enforced:
        return []
    entries = ", ".join(spec.agent.allow_egress) or "(empty)"
    return [
        f"warning: agent.allow_egress [{entries}] was not applied ({report.containment.reason}), "
        "so this run reached whatever it liked; add the step `- assert_no_egress` to make "
        "containment a requirement of this flow"
    ]
