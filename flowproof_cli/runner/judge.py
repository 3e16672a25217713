"""A flow's failures, most fundamental first; assertions only once the run itself is sound.

The order matters: a divergence explains a crash that followed it (the agent choked on the
409), and a run that made no model call has no trajectory worth asserting on. Whichever
driver ran the agent, what it did is judged from what the proxy saw.
"""

from __future__ import annotations

from collections.abc import Mapping

from flowproof_cli.assertions import evaluate
from flowproof_cli.cassette import CassetteSession, Mode
from flowproof_cli.mcp.flow import McpVerdict
from flowproof_cli.runner.drivers import Driven
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
    if driven.failure is not None:
        return [driven.failure]
    if session.requests == 0 and (mcp.soft or mcp.calls == 0 or recorded):
        return mcp.soft or [driven.no_requests]
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
