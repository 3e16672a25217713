"""`flowproof schema`: the JSON Schema of *.flow.yaml, for editors."""

from __future__ import annotations

import click


@click.command()
def schema() -> None:
    """Print the JSON Schema of *.flow.yaml files."""
    from flowproof_cli.spec.schema import schema_text  # noqa: PLC0415 - not for --help

    click.echo(schema_text(), nl=False)
