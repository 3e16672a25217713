"""The `flowproof` command group, and the one place errors become exit codes."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import sys
from typing import NamedTuple, NoReturn

import click

from flowproof_cli.errors import ExitCode, FlowproofError


class Entry(NamedTuple):
    module: str  # flowproof_cli.cli.<module>, holding a command of that name
    summary: str  # the first sentence of the command's help, as `flowproof --help` lists it


#: Each command's module, imported only when that command runs, and its one-line summary, so
#: that `flowproof --help` imports no command at all (tests/unit/test_import_budget.py keeps
#: each summary equal to the command's own help and pins what each path imports).
COMMANDS = {
    "record": Entry(
        "record",
        "Record SPEC against the real model (FLOWPROOF_AGENT_UPSTREAM, FLOWPROOF_AGENT_KEY).",
    ),
    "run": Entry(
        "run",
        "Replay SPEC, or every *.flow.yaml below DIR, from recorded traces.",
    ),
    "schema": Entry("schema", "Print the JSON Schema of *.flow.yaml files."),
    "doctor": Entry(
        "doctor",
        "Run CMD once and report whether its model requests reach flowproof (no spec, no key).",
    ),
    "match": Entry(
        "match",
        "Inspect the built-in match presets (named rule sets for `match: {presets: [...]}`).",
    ),
    "audit": Entry(
        "audit", "Report the controls of the latest run recorded under DIR (never replays)."
    ),
    "diff": Entry(
        "diff", "What the agent did and was told differently from trace OLD to trace NEW."
    ),
    "show": Entry(
        "show",
        "Print TRACE turn by turn: each request's model and new messages, the tool calls with "
        "their arguments, tool results (mocked ones marked), the reply, then the MCP calls and "
        "notifications of each server and the egress blocked.",
    ),
    "init": Entry(
        "init",
        "Run CMD once against canned replies and write a starter spec declaring its tools.",
    ),
    "inspect": Entry(
        "inspect",
        "Open TRACE (or the trace of SPEC) in mitmweb on 127.0.0.1, each model turn and MCP "
        "call one flow, read as a conversation.",
    ),
    "mcp-stdio": Entry(
        "mcp_stdio",
        "Stand in for the MCP server SERVER over stdio (started by flowproof's injection).",
    ),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = getattr(
            importlib.import_module(f"flowproof_cli.cli.{entry.module}"), entry.module
        )
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from COMMANDS' summaries: click's own would import every command."""
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [
            (name, click.Command(name, help=entry.summary).get_short_help_str(limit))
            for name, entry in COMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="flowproof")
def cli() -> None:
    """Record an agent's model traffic once; replay it deterministically in CI."""


def main() -> None:
    """The console entry point: the command's exit code, then `_exit`."""
    try:
        code = exit_code()
    except KeyboardInterrupt:  # a Ctrl-C between the command's end and `_exit`
        click.echo("interrupted", err=True)
        code = ExitCode.INTERRUPTED
    _exit(code)


def exit_code() -> int:
    """Run the command; its errors become one line on stderr and their exit code."""
    try:
        code = cli.main(standalone_mode=False)
    except FlowproofError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        # click turns Ctrl-C (and end of input at a prompt) into Abort: an interrupt.
        click.echo("interrupted", err=True)
        return ExitCode.INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return ExitCode.ERROR
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return ExitCode.INTERRUPTED
    except SystemExit as exc:  # a command that ends with its verdict's code
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or ExitCode.PASSED
        click.echo(exc.code, err=True)
        return ExitCode.FAILED
    return code if isinstance(code, int) else ExitCode.PASSED


def _exit(code: int) -> NoReturn:
    """Exit as `sys.exit` would, minus the interpreter's teardown of every module and object
    (with mitmproxy and pydantic loaded, about a third of a second of a one-flow run). What a
    normal exit does that matters still happens first: buffered output is flushed, and the
    atexit handlers run (logging, temporary folders, the process keeper).

    The verdict is printed and its code decided by now, so a Ctrl-C here would only cut that
    clean-up short, with Python's traceback from the handler it landed in: it is ignored."""
    with contextlib.suppress(ValueError):  # not the main thread: no handler to change
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing left to say
            stream.flush()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(int(code))
