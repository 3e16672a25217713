"""`flowproof match`: the built-in match presets, listed and shown as the data they are, and
the rules a flow needs, learned from two runs of it (`learn`, in cli/learn.py)."""

from __future__ import annotations

import click

from flowproof_cli.cli.learn import learn


@click.group()
def match() -> None:
    """Inspect the built-in match presets (named rule sets for `match: {presets: [...]}`), or
    learn the rules a flow needs from two runs of it."""


@match.command("list")
def list_presets() -> None:
    """Name every preset with its one-line description."""
    from flowproof_cli.match.presets import load_preset, preset_names  # noqa: PLC0415

    for name in preset_names():
        click.echo(f"{name}: {load_preset(name).description}")


@match.command()
@click.argument("name")
def show(name: str) -> None:
    """Print the rules of preset NAME, as its data file writes them (an agent's preset
    first says which agent and which of its versions it was tested with)."""
    from flowproof_cli.match.presets import load_preset  # noqa: PLC0415

    preset = load_preset(name)
    header = preset.header()
    if header is not None:
        click.echo(header)
    click.echo(preset.text.rstrip("\n"))


match.add_command(learn)
