"""The `flowproof` command group, and the one place errors become exit codes."""

from __future__ import annotations

import importlib
import sys

import click

from flowproof_cli.errors import ExitCode, FlowproofError

#: Each command's module, imported only when that command runs: `schema` and `mcp-stdio`
#: must not pay for the proxy engine (mitmproxy) and the egress package.
COMMANDS = {
    "record": "record",
    "run": "run",
    "schema": "schema",
    "doctor": "doctor",
    "match": "match",
    "audit": "audit",
    "diff": "diff",
    "show": "show",
    "mcp-stdio": "mcp_stdio",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        command = getattr(importlib.import_module(f"flowproof_cli.cli.{module}"), module)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="flowproof")
def cli() -> None:
    """Record an agent's model traffic once; replay it deterministically in CI."""


def main() -> None:
    try:
        code = cli.main(standalone_mode=False)
    except FlowproofError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        # click turns Ctrl-C (and end of input at a prompt) into Abort: an interrupt.
        click.echo("interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.ERROR)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    sys.exit(code if isinstance(code, int) else ExitCode.PASSED)
