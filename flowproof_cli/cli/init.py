"""`flowproof init --agent CMD`: write a starter spec from one run against canned replies.

Exit 0 with the spec written, 1 when no model request arrived (doctor's wiring hint, no file
written), 2 when the file exists already or the command cannot start.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from flowproof_cli.cli.options import agent_option, agent_timeout_option
from flowproof_cli.errors import ExitCode, FlowproofError, SpecExistsError


@click.command()
@agent_option("The agent command, split like agent.command; it runs in the spec's directory.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The spec to write (default: <script>.flow.yaml, named after CMD's script).",
)
@agent_timeout_option(60.0)
def init(command: str, out: Path | None, timeout: float) -> None:
    """Run CMD once against canned replies and write a starter spec declaring its tools.

    No model and no key: the spec names the agent, the tools it offered the model and a
    prompt placeholder, ready for `flowproof record`. An existing file is never replaced.
    """
    import asyncio  # noqa: PLC0415 - not for --help

    from flowproof_cli.cli.doctor import render_report  # noqa: PLC0415
    from flowproof_cli.doctor.starter import default_spec_name, probe, starter_spec  # noqa: PLC0415

    path = out or Path(default_spec_name(command))
    if path.exists():
        raise SpecExistsError(
            f"{path} already exists; init never replaces a spec. Fix: pass another file "
            f"with --out, or delete {path} first"
        )
    if not path.parent.is_dir():  # the agent runs there: say so, not "python was not found"
        raise FlowproofError(
            f"{path.parent} is not a directory (the agent runs in the spec's directory). "
            "Fix: create it first, or choose another --out"
        )
    found = asyncio.run(probe(command, cwd=path.parent.resolve(), timeout_s=timeout))
    if not found.report.model_requests:
        for line in render_report(found.report):
            click.echo(line)
        click.echo("no spec written: fix the wiring above, then run init again", err=True)
        sys.exit(ExitCode.FAILED)
    try:
        with path.open("x", encoding="utf-8") as handle:
            handle.write(starter_spec(command, found, path.name))
    except OSError as exc:
        raise FlowproofError(
            f"cannot write {path}: {exc.strerror}. Fix: choose a writable --out"
        ) from None
    tools = ", ".join(found.tools) or "none"
    click.echo(f"wrote {path}: {found.report.model_requests} model request(s), tools: {tools}")
    click.echo(schema_beside(path))
    click.echo(f"next: edit its prompt and assertions, then `flowproof record {path}`")


def schema_beside(spec_path: Path) -> str:
    """Write the spec schema beside a new spec, as the file its first line names, and say
    what was done. A schema file already there is left as it is (it may be the project's
    own), with the command that refreshes it when it is not this version's schema."""
    from flowproof_cli.spec.schema import SCHEMA_FILE, schema_text  # noqa: PLC0415

    target = spec_path.parent / SCHEMA_FILE
    text = schema_text()
    refresh = f"flowproof schema > {target}"
    try:
        with target.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        if _holds(target, text):
            return f"{target}, the schema its first line names, is current"
        return (
            f"note: left {target} as it is: it is not this flowproof's schema. Refresh: {refresh}"
        )
    except OSError as exc:
        return (
            f"warning: could not write {target} ({exc.strerror}): editors find no schema "
            f"there until `{refresh}`"
        )
    return f"wrote {target}: the schema its first line names, for editors"


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False
