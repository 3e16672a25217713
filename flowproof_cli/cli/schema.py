"""`flowproof schema`: the JSON Schema of *.flow.yaml, for editors."""

from __future__ import annotations

import json

import click


@click.command()
def schema() -> None:
    """Print the JSON Schema of *.flow.yaml files."""
    from flowproof_cli.spec import spec_json_schema  # noqa: PLC0415 - not for --help

    click.echo(json.dumps(spec_json_schema(), indent=2, sort_keys=True))
