"""Every verdict of a flow, in one place: the facts of the run in, a `Judgement` out.

The run's soundness first, most fundamental first, and the assertions only once the run is
sound: a divergence explains a crash that followed it (the agent choked on the 409), and a
run that made no model call has no trajectory worth asserting on. Whichever driver ran the
agent, what it did is judged from what the proxy saw. Then, whatever came before,
`assert_no_egress` against what containment refused, the secret leaks the scan found, and
for a failed replay what moved since recording.

The modules that observe (the session, the drivers, egress/, evidence/secrets.py) report
facts; only this one reads the spec's assertions against them and words the failures, each
with its step's line as data (`Failure.line`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flowproof_cli import trace as traces
from flowproof_cli.assertions import RunFacts, evaluate
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.egress.report import EgressReport
from flowproof_cli.evidence.secrets import Leak
from flowproof_cli.faults.plan import Fault
from flowproof_cli.match.rules import MatchRules
from flowproof_cli.mode import Mode
from flowproof_cli.runner.drivers import Driven, Service
from flowproof_cli.runner.environment import service_wiring_hint, wiring_hint
from flowproof_cli.runner.fault_verdicts import fault_failures, fault_outcomes
from flowproof_cli.runner.mcp_servers import McpVerdict
from flowproof_cli.runner.turn_judge import judge_turns, unserved_turns
from flowproof_cli.spec import FlowSpec
from flowproof_cli.spec.steps import StepBase
from flowproof_cli.trajectory import Trajectory
from flowproof_cli.verdict import Failure


@dataclass(frozen=True)
class Replayed:
    """What a failed replay's notes compare the flow against: the trace it replayed, the
    match rules in force, and the command that records it again."""

    trace: traces.Trace
    trace_path: Path
    rules: MatchRules
    record_command: str


@dataclass
class Judgement:
    """The verdict's judged part, copied into the FlowResult as it is."""

    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # printed on success too
    containment: str | None = None  # "egress containment: ..." for every run of an agent
    egress_report: list[str] = field(default_factory=list)  # stderr: blocked, local, fs
    # Why `assert_no_egress` could not certify this run (containment was not enforced).
    capability_error: str | None = None
    # What THIS run's containment refused; None when it was not contained.
    egress_blocked: list[dict[str, Any]] | None = None


def judge(
    spec: FlowSpec,
    *,
    session: CassetteSession,
    driven: Driven,
    mode: Mode,
    environ: Mapping[str, str],
    mcp: McpVerdict | None = None,
    egress: EgressReport | None = None,
    leaks: Sequence[Leak] = (),
    replayed: Replayed | None = None,
    faults: tuple[Fault, ...] = (),
) -> Judgement:
    """The flow's verdict from the run's facts: `egress` is the report of an agent run
    (None when no agent ran), `leaks` what the secret scan found, `replayed` the trace a
    replay judged against (None at record)."""
    unsound = soundness(
        session=session, driven=driven, mode=mode, mcp=mcp, exit_judged=spec.judges_exit_code
    )
    run = run_facts(session, driven)
    if unsound or not spec.is_conversation:
        judged = unsound or assertions(spec, spec.steps, session.trajectory(), environ, run)
    else:  # one loop over the turns
        judged = judge_turns(spec, session, driven.turns, environ, run)
    judgement = Judgement(judged)
    if not unsound:  # a fault that never came to pass is judged on a sound run only
        judgement.failures.extend(_fault_failures(faults, session, mcp or McpVerdict.none()))
    if egress is not None:
        _judge_egress(judgement, spec, egress)
    judgement.failures.extend(leak_failures(leaks))
    if judgement.failures and replayed is not None:
        judgement.notes.extend(_replay_notes(spec, replayed))
    return judgement


def run_facts(session: CassetteSession, driven: Driven) -> RunFacts:
    """What `output`, `exit code` and `model calls` steps judge: the agent's own output and
    exit, and every model request the session counted."""
    return RunFacts(driven.output, driven.exit_code, session.requests)


def _fault_failures(
    faults: tuple[Fault, ...], session: CassetteSession, mcp: McpVerdict
) -> list[Failure]:
    """What became of the faults of the model boundary and of each MCP server."""
    applied, not_applicable = fault_outcomes(session.faults, mcp)
    seen = {**mcp.per_server, "model": session.faults.calls}
    return fault_failures(faults, applied, not_applicable, seen)


def soundness(
    *,
    session: CassetteSession,
    driven: Driven,
    mode: Mode,
    mcp: McpVerdict | None = None,
    exit_judged: bool = False,
) -> list[Failure]:
    """Why the run itself is unsound, the first kind found (empty when it is sound); in a
    conversation each failure names its turn. With `exit_judged` (the spec has an `assert:
    exit code` step) a non-zero exit is left to that step, not a failure by itself."""
    turn = session.divergence.conversation_turn if session.divergence else None
    if exit_judged and driven.exit_failure:
        driven = replace(driven, failure=None, exit_failure=False)
    return [
        found if isinstance(found, Failure) else Failure(found, turn=turn)
        for found in _unsound(session, driven, mode, mcp)
    ]


def _unsound(
    session: CassetteSession, driven: Driven, mode: Mode, mcp: McpVerdict | None
) -> Sequence[str | Failure]:
    recorded = len(session.recorded)
    mcp = mcp or McpVerdict.none()
    if session.errors:
        return list(dict.fromkeys(session.errors))
    if session.divergence is not None and session.divergence.conversation_turn is not None:
        return [f"divergence in {session.divergence.message}"]  # "in conversation turn 2 ..."
    if session.divergence is not None:
        return [f"divergence at {session.divergence.message}"]
    if mcp.hard:  # an MCP divergence explains a crash that followed it, like a model one
        return _by_turn(mcp.hard, mcp)
    if driven.failure is not None:  # an MCP call left unanswered may be why it timed out
        return [Failure(driven.failure, turn=driven.failure_turn), *mcp.waiting]
    if session.requests == 0 and (mcp.soft or mcp.calls == 0 or recorded):
        return _by_turn(mcp.soft, mcp) or [
            _no_requests(driven, recorded if mode is Mode.REPLAY else None)
        ]
    if mode is Mode.REPLAY and len(session.served) != recorded and session.conversation:
        return unserved_turns(session, driven.turns)
    if mode is Mode.REPLAY and len(session.served) != recorded:
        unused = sorted(set(range(recorded)) - set(session.served))
        turns = ", ".join(str(position + 1) for position in unused)
        return [
            f"the agent made {session.requests} model call(s), the recording has {recorded} "
            f"(turn(s) never requested: {turns})"
        ]
    return _by_turn(mcp.soft, mcp)


def _by_turn(failures: list[str], mcp: McpVerdict) -> list[str | Failure]:
    """MCP failures, each with its conversation turn when it has one."""
    return [
        Failure(failure, turn=mcp.turns[failure]) if failure in mcp.turns else failure
        for failure in failures
    ]


def assertions(
    spec: FlowSpec,
    steps: Sequence[StepBase],
    trajectory: Trajectory,
    environ: Mapping[str, str],
    run: RunFacts | None = None,
) -> list[Failure]:
    """The failed assertions among `steps` against `trajectory` (and `run`), in step order,
    each with its step's line (the flow's `strict` check has none)."""
    return [
        Failure(failure.message, failure.step_line)
        for failure in evaluate(spec, trajectory, environ, steps=steps, run=run)
    ]


def leak_failures(leaks: Sequence[Leak]) -> list[Failure]:
    """`assert_no_secret_leak`: one failure per leaked variable, at its step's line."""
    return [Failure(leak.message, leak.line) for leak in leaks]


def _judge_egress(judgement: Judgement, spec: FlowSpec, report: EgressReport) -> None:
    """The tier, the report, `assert_no_egress` and, for the run record, whether it could
    certify at all and what THIS run refused (never what a trace recorded elsewhere holds)."""
    judgement.containment = report.containment.line
    judgement.egress_report = report.stderr_lines()
    judgement.notes.extend(allow_list_warning(spec, report))
    judgement.failures.extend(no_egress_failures(spec, report))
    judgement.capability_error = report.uncontained_reason if spec.asserts_no_egress else None
    if report.containment.enforced:
        judgement.egress_blocked = report.trace_section()


def no_egress_failures(spec: FlowSpec, report: EgressReport) -> list[Failure]:
    """`assert_no_egress`: a capability claim, never vacuous; at its step's line."""
    if not spec.asserts_no_egress:
        return []
    line = next((step.line for step in spec.steps if step.kind == "assert_no_egress"), None)
    reason = report.uncontained_reason
    if reason is not None:
        return [Failure(f"assert_no_egress: cannot certify: {reason}", line)]
    if not report.blocked:
        return []
    attempts = ", ".join(report.refused_attempts())
    count = len(report.blocked)
    message = f"assert_no_egress: the agent attempted {count} undeclared destination(s): "
    return [Failure(message + attempts, line)]


def allow_list_warning(spec: FlowSpec, report: EgressReport) -> list[str]:
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


def _replay_notes(spec: FlowSpec, replayed: Replayed) -> list[str]:
    """A failing replay of another flow's trace, or one whose mocks or match rules moved
    since recording, says so."""
    trace = replayed.trace
    other_flow = traces.other_flow_note(trace, spec.name, str(replayed.trace_path))
    changed = []
    if trace.mocks != dict(spec.mocks):
        changed.append("the spec's tools: mocks differ from the ones")
    if trace.match != replayed.rules.snapshot():
        changed.append("the match rules in force differ from the ones")
    return [
        *([other_flow] if other_flow else []),
        *(
            f"{what} snapshotted in the trace; re-record with `{replayed.record_command}` if "
            "that change is intended"
            for what in changed
        ),
    ]


def _no_requests(driven: Driven, recorded: int | None) -> str:
    """Why no model request may have reached the proxy, and what to do (replay: against
    how many turns the recording has)."""
    has = f"; the recording has {recorded}" if recorded is not None else ""
    service = driven.service
    if service is None:
        return (
            "no model request reached flowproof's proxy: the agent exited 0 without calling "
            f"a model through it (its client ignored the injected base URL){has}. {wiring_hint()}"
        )
    return (
        f"no model request reached flowproof's proxy on 127.0.0.1:{service.proxy_port}: the "
        f"service at {service.url} {_how_it_answered(service)}{has}. "
        f"{service_wiring_hint(service.proxy_port)}"
    )


def _how_it_answered(service: Service) -> str:
    answer = service.answer
    if answer.answered_ok:
        return (
            f"answered HTTP {answer.status} without calling a model through it (its model "
            "client points elsewhere)"
        )
    answered = f"answered HTTP {answer.status}" if answer.status is not None else "ran"
    why = (
        f"{answered} without calling a model through it (it failed before its first "
        "model call, or its model client points elsewhere)"
    )
    body = answer.body.strip()
    return f"{why}; it answered: {_clip(body)}" if body else why


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."
