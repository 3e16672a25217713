"""`flowproof show TRACE`: a trace as a readable timeline (flowproof_cli/evidence/timeline.py)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=False, path_type=Path))
def show(trace_path: Path) -> None:
    """Print TRACE turn by turn: each request's model and new messages, the tool calls with
    their arguments, tool results (mocked ones marked), the reply, then the MCP calls and
    notifications of each server and the egress blocked. Exit 2 when TRACE is not a
    readable trace.
    """
    from flowproof_cli import trace as traces  # noqa: PLC0415 - not for --help
    from flowproof_cli.evidence.timeline import timeline  # noqa: PLC0415

    for line in timeline(traces.load(trace_path), str(trace_path)):
        click.echo(line)
