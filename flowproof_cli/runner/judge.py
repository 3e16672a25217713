"""A flow's failures, most fundamental first; assertions only once the run itself is sound.

The order matters: a divergence explains a crash that followed it (the agent choked on the
409), and a run that made no model call has no trajectory worth asserting on. Whichever
driver ran the agent, what it did is judged from what the proxy saw.
"""

from __future__ import annotations

from collections.abc import Mapping

from flowproof_cli.assertions import evaluate
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.mode import Mode
from flowproof_cli.runner.drivers import Driven, Service
from flowproof_cli.runner.environment import service_wiring_hint, wiring_hint
from flowproof_cli.runner.mcp_servers import McpVerdict
from flowproof_cli.spec import FlowSpec


def judge(
    spec: FlowSpec,
    *,
    session: CassetteSession,
    driven: Driven,
    mode: Mode,
    environ: Mapping[str, str],
    mcp: McpVerdict | None = None,
) -> list[str]:
    recorded = len(session.recorded)
    mcp = mcp or McpVerdict.none()
    if session.errors:
        return list(dict.fromkeys(session.errors))
    if session.divergence is not None:
        return [f"divergence at {session.divergence.message}"]
    if mcp.hard:  # an MCP divergence explains a crash that followed it, like a model one
        return mcp.hard
    if driven.failure is not None:  # an MCP call left unanswered may be why it timed out
        return [driven.failure, *mcp.waiting]
    if session.requests == 0 and (mcp.soft or mcp.calls == 0 or recorded):
        return mcp.soft or [_no_requests(driven, recorded if mode is Mode.REPLAY else None)]
    if mode is Mode.REPLAY and len(session.served) != recorded:
        unused = sorted(set(range(recorded)) - set(session.served))
        turns = ", ".join(str(position + 1) for position in unused)
        return [
            f"the agent made {session.requests} model call(s), the recording has {recorded} "
            f"(turn(s) never requested: {turns})"
        ]
    if mcp.soft:
        return mcp.soft
    failures = evaluate(spec, session.trajectory(), environ)
    return [
        f"{failure.message} (step at line {failure.step_line})"
        if failure.step_line
        else failure.message
        for failure in failures
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
