"""`flowproof schema`: the JSON Schema of *.flow.yaml, for editors."""

from __future__ import annotations

import json

import click

from flowproof_cli.spec import spec_json_schema


@click.command()
def schema() -> None:
    """Print the JSON Schema of *.flow.yaml files."""
    click.echo(json.dumps(spec_json_schema(), indent=2, sort_keys=True))
