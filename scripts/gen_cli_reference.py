"""Generate docs/reference/cli.md from the click commands themselves, so it cannot drift.

    .venv/bin/python scripts/gen_cli_reference.py          # rewrite docs/reference/cli.md
    .venv/bin/python scripts/gen_cli_reference.py --check  # exit 1 when the page is stale

Each command's `--help`, exactly as click prints it at a fixed width (not the terminal's),
in the order `flowproof --help` lists them; a group's subcommands follow it.
tests/unit/test_cli_reference.py fails when the committed page and the commands disagree.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from flowproof_cli.cli.main import COMMANDS, cli  # noqa: E402

PAGE = REPO / "docs" / "reference" / "cli.md"
WIDTH = 100
HEADER = """# CLI reference

<!-- Generated from the click commands by `.venv/bin/python scripts/gen_cli_reference.py`.
     Do not edit by hand: a unit test fails when this page and the commands disagree. -->

Every command's `--help`. The guide, with examples and exit codes, is [../cli.md](../cli.md).
"""


def _help(command: click.Command, path: list[str], parent: click.Context | None) -> str:
    # click caches a command's help option the first time any context renders it (8.2:
    # `_help_option`); one made elsewhere in this process (a test invoking the command alone,
    # without the group's `-h`) would otherwise leak into the page.
    if getattr(command, "_help_option", None) is not None:
        command._help_option = None  # type: ignore[attr-defined]
    ctx = click.Context(
        command,
        info_name=path[-1],
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
    )
    return command.get_help(ctx)


def _sections(
    command: click.Command, path: list[str], parent: click.Context | None
) -> Iterator[str]:
    yield f"## `{' '.join(path)}`\n\n```text\n{_help(command, path, parent)}\n```\n"
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=path[-1], parent=parent)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _sections(sub, [*path, name], ctx)


def render() -> str:
    """The whole page: the group, then each command of COMMANDS in order."""
    root = click.Context(
        cli,
        info_name="flowproof",
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        **cli.context_settings,  # `-h` too: every command's context inherits it
    )
    parts = [HEADER, f"## `flowproof`\n\n```text\n{cli.get_help(root)}\n```\n"]
    for name in COMMANDS:
        command = cli.get_command(root, name)
        if command is not None and not command.hidden:
            parts.extend(_sections(command, ["flowproof", name], root))
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    text = render()
    if argv == ["--check"]:
        if PAGE.exists() and PAGE.read_text(encoding="utf-8") == text:
            return 0
        print(
            f"{PAGE} is stale: run .venv/bin/python scripts/gen_cli_reference.py", file=sys.stderr
        )
        return 1
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
