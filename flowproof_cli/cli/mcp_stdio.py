"""`flowproof mcp-stdio`: the stand-in an agent launches in place of a stdio MCP server.

Not typed by hand: flowproof injects the whole command line as FLOWPROOF_MCP_SERVER_<NAME>
for the agent's MCP config to launch. Everything it needs is in the session file it names.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from flowproof_cli.errors import ConfigError, ExitCode


@click.command("mcp-stdio")
@click.option("--server", "server", required=True, help="The server's name in the spec.")
@click.option(
    "--session",
    "session_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The session file flowproof wrote for this flow.",
)
def mcp_stdio(server: str, session_path: Path) -> None:
    """Stand in for the MCP server SERVER over stdio (started by flowproof's injection)."""
    from flowproof_cli.mcp.stdio import StandinSession, run_standin  # noqa: PLC0415

    try:
        session = StandinSession.read(session_path)
        if session.server != server:
            raise ConfigError(
                f"the session {session_path} is for the MCP server '{session.server}', "
                f"not '{server}'"
            )
    except (OSError, ValueError, TypeError) as exc:
        # Printed here, not raised: this command also runs through a fast path that
        # bypasses `main` (the agent starts it once per server, so start-up time counts).
        click.echo(
            f"error: the MCP stand-in for '{server}' cannot read its session {session_path}: "
            f"{exc} (it exists only while flowproof runs the flow)",
            err=True,
        )
        sys.exit(ExitCode.ERROR)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitCode.ERROR)
    sys.exit(run_standin(session))
