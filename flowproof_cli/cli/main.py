"""The `flowproof` command group, and the one place errors become exit codes."""

from __future__ import annotations

import sys

import click

from flowproof_cli.cli import doctor, mcp_stdio, record, run, schema
from flowproof_cli.errors import ExitCode, FlowproofError

INTERRUPTED = 130  # the shell's convention for a run ended by SIGINT


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="flowproof")
def cli() -> None:
    """Record an agent's model traffic once; replay it deterministically in CI."""


cli.add_command(record.record)
cli.add_command(run.run)
cli.add_command(schema.schema)
cli.add_command(doctor.doctor)
cli.add_command(mcp_stdio.mcp_stdio)


def main() -> None:
    try:
        code = cli.main(standalone_mode=False)
    except FlowproofError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        # click turns Ctrl-C into Abort; flowproof asks no questions, so it is an interrupt.
        click.echo("interrupted", err=True)
        sys.exit(INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.ERROR)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(INTERRUPTED)
    sys.exit(code if isinstance(code, int) else ExitCode.PASSED)
