"""`flowproof inspect TRACE|SPEC`: a recorded trajectory in mitmweb (flowproof_cli/inspect/)."""

from __future__ import annotations

from pathlib import Path

import click

from flowproof_cli.errors import TraceError

SPEC_SUFFIX = ".flow.yaml"


def _trace_path(target: Path) -> Path:
    """TRACE itself, or the trace beside SPEC; a missing file names the fix."""
    if target.name.endswith(SPEC_SUFFIX):
        from flowproof_cli.trace import trace_path_for  # noqa: PLC0415 - not for --help

        if not target.is_file():
            raise TraceError(f"{target}: no such spec. Fix: give a *.flow.yaml or a *.trace.yaml")
        trace = trace_path_for(target)
        if not trace.is_file():
            raise TraceError(f"no trace at {trace}; record it first: flowproof record {target}")
        return trace
    if not target.is_file():
        raise TraceError(
            f"{target}: no such trace. Fix: give a recorded *.trace.yaml, or the *.flow.yaml "
            "it was recorded for"
        )
    return target


@click.command()
@click.argument("target", metavar="TRACE|SPEC", type=click.Path(path_type=Path))
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="The web UI's port on 127.0.0.1 (default: a free one).",
)
def inspect(target: Path, port: int) -> None:
    """Open TRACE (or the trace of SPEC) in mitmweb on 127.0.0.1, each model turn and MCP
    call one flow, read as a conversation. The URL printed carries a token generated for
    this session; no browser is launched. Serves until Ctrl-C or SIGTERM (exit 0); exit 2
    when TRACE is missing or not a readable trace.
    """
    from flowproof_cli import trace as traces  # noqa: PLC0415 - not for --help
    from flowproof_cli.inspect.trace_flows import trace_flows  # noqa: PLC0415
    from flowproof_cli.inspect.web_view import WebView  # noqa: PLC0415

    path = _trace_path(target)
    flows = trace_flows(traces.load(path), str(path))
    if not flows:
        raise TraceError(f"{path}: no model turns and no MCP calls to show")
    view = WebView(port)
    try:
        url = view.start()
        for flow in flows:
            view.feed(flow)
        click.echo(f"inspect: {len(flows)} flow(s) of {path}")
        click.echo(f"inspect: open {url}")
        click.echo("inspect: the token in the URL is this session's password; Ctrl-C stops")
        view.serve_until_stopped()
    finally:
        view.close()
