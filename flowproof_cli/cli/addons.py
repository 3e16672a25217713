"""`flowproof addons path`: where the installed addon scripts are, for stock mitmproxy.

A user with only the installed package has no `addons/` folder of a checkout to hand to
`mitmdump -s`: the scripts ship inside the package as `flowproof_addons`. This prints the
file's absolute path, found without importing the package (importing an addon imports
mitmproxy, which a path lookup must not pay: tests/unit/test_import_budget.py).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

from flowproof_cli.errors import ConfigError

#: The scripts that load into stock mitmdump/mitmweb by themselves (`-s`): each ends with its
#: own `addons = [...]` (guard, boundary, conversation view, backstop). Listed in the help.
SCRIPTS = ("model", "mcp_http")


def addons_folder() -> Path:
    """The installed `flowproof_addons` package's folder (no module of it is imported)."""
    spec = importlib.util.find_spec("flowproof_addons")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError(
            "the package flowproof_addons is not installed beside flowproof_cli. Fix: "
            "reinstall flowproof (pip install --force-reinstall flowproof)"
        )
    return Path(locations[0]).resolve()


def script_path(name: str) -> Path:
    """The absolute path of addon script `name` (one of SCRIPTS)."""
    path = addons_folder() / f"{name}.py"
    if not path.is_file():
        raise ConfigError(f"{path} is missing from the installed package. Fix: reinstall flowproof")
    return path


@click.group()
def addons() -> None:
    """Locate the mitmproxy addon scripts flowproof installs, for stock mitmdump and mitmweb."""


@addons.command()
@click.argument("name", required=False, type=click.Choice(SCRIPTS))
def path(name: str | None) -> None:
    """Print the absolute path of addon script NAME (with no NAME: their folder), as in
    `mitmdump -s "$(flowproof addons path model)"`.

    \b
    model     the model boundary: replays a trace, or records one (docs/inspect.md)
    mcp_http  the streamable-HTTP MCP boundary (docs/mcp.md)
    """
    click.echo(str(script_path(name) if name is not None else addons_folder()))
