"""The `flowproof` command group, and the one place errors become exit codes."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import select
import signal
import sys
from typing import NamedTuple, NoReturn

import click

from flowproof_cli.errors import ExitCode, FlowproofError, Terminated


class Entry(NamedTuple):
    module: str  # flowproof_cli.cli.<module>, holding a command of that name
    summary: str  # the first sentence of the command's help, as `flowproof --help` lists it
    runs_flows: bool = False  # it owes a verdict per flow (`Verdicts`): a `FlowCommand`


#: Each command's module, imported only when that command runs, and its one-line summary, so
#: that `flowproof --help` imports no command at all (tests/unit/test_import_budget.py keeps
#: each summary equal to the command's own help and pins what each path imports).
COMMANDS = {
    "record": Entry(
        "record",
        "Record SPEC against the real model (FLOWPROOF_AGENT_UPSTREAM, FLOWPROOF_AGENT_KEY).",
        runs_flows=True,
    ),
    "run": Entry(
        "run",
        "Replay SPEC, or every *.flow.yaml below DIR, from recorded traces.",
        runs_flows=True,
    ),
    "chaos": Entry(
        "chaos",
        "Replay each passing flow once per (call x fault kind), one fault at a time, offline, "
        "and map what the agent survives.",
        runs_flows=True,
    ),
    "check": Entry(
        "check", "Validate specs and suites and find stale traces, without running anything."
    ),
    "schema": Entry("schema", "Print the JSON Schema of *.flow.yaml files."),
    "doctor": Entry(
        "doctor",
        "Run CMD once and report whether its model requests reach flowproof (no spec, no key).",
    ),
    "match": Entry(
        "match",
        "Inspect the built-in match presets (named rule sets for `match: {presets: [...]}`), "
        "or learn the rules a flow needs from two runs of it.",
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
    "addons": Entry(
        "addons",
        "Locate the mitmproxy addon scripts flowproof installs, for stock mitmdump and mitmweb.",
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


class Verdicts:
    """What a command that runs flows owes before it may end with a verdict's exit code (0
    or 1): a printed verdict for every flow it was asked to run (the summary line, the JSON
    document, a single spec's verdict line). `exit_code` holds every such command to it,
    whatever ended it: a return that skipped the printing, a `SystemExit(0)` raised by
    anything in the process. One rule in one place, not a check at each call site."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.owing = False  # a command that runs flows has started
        self.asked: int | None = None  # the flows it was asked to run, once planned
        self.printed: int | None = None  # the flows the closing document printed

    def expect(self, flows: int | None = None) -> None:
        """The command runs flows (`flows` of them, once known): it owes their verdicts."""
        self.owing = True
        if flows is not None:
            self.asked = flows

    def owe[T](self, jobs: list[T]) -> list[T]:
        """`jobs` planned: their verdicts are owed (the jobs are handed back)."""
        self.expect(len(jobs))
        return jobs

    def gave(self, flows: int) -> None:
        """The closing document is printed: a verdict for each of `flows` flows."""
        self.printed = flows

    @property
    def settled(self) -> bool:
        return not self.owing or (self.asked is not None and self.printed == self.asked)

    def shortfall(self, ended_by: SystemExit | None) -> str:
        if _output_closed():  # click ends a command whose stdout broke with SystemExit(1)
            flows = f"each of the {self.asked} flow(s)" if self.asked is not None else "any flow"
            return (
                "flowproof's standard output was closed (its reader, such as `head`, went "
                f"away) before it printed a verdict for {flows} it was asked to run: that is "
                "no pass, so the exit code is 2. Fix: let the whole output be read (write it "
                "to a file, or filter it with `grep`/`tail`, which read to the end)"
            )
        if self.asked is None:
            said = "flowproof ended before it printed any verdict"
        else:
            said = (
                f"flowproof ended having printed a verdict for {self.printed or 0} of the "
                f"{self.asked} flow(s) it was asked to run"
            )
        return (
            f"{said}{_ended_by(ended_by)}: that is no pass, so the exit code is 2. Fix: find "
            "what ended it there (code of yours that exits in flowproof's process, or a "
            "defect of flowproof's to report)"
        )


def _output_closed() -> bool:
    """Standard output is a pipe or socket whose reader went away (poll says POLLERR): a
    write there failed, and no verdict after it reached anyone."""
    try:
        poller = select.poll()
        poller.register(1, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no descriptor 1, no poll on this platform
        return False


def _ended_by(exc: SystemExit | None) -> str:
    """`, by SystemExit(0) raised at FILE:LINE`: where an exit came from, when it did."""
    if exc is None:
        return ""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    at = f" raised at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
    code = int(exc.code) if isinstance(exc.code, int) else repr(exc.code)
    return f", by SystemExit({code}){at}"


#: The process's one account of owed verdicts.
VERDICTS = Verdicts()


class FlowCommand(click.Command):
    """A command that runs flows: it owes a verdict for every flow (`VERDICTS`) from the
    moment its name is read (`exit_code`), or its body starts when called some other way;
    only showing its help (all that was asked) owes nothing."""

    def invoke(self, ctx: click.Context) -> object:
        VERDICTS.expect()
        return super().invoke(ctx)

    def get_help(self, ctx: click.Context) -> str:
        VERDICTS.owing = False
        return super().get_help(ctx)


def main() -> None:
    """The console entry point: the command's exit code, then `_exit`."""
    try:
        code = exit_code()
    except KeyboardInterrupt:  # a Ctrl-C between the command's end and `_exit`
        click.echo("interrupted", err=True)
        code = ExitCode.INTERRUPTED
    _exit(code)


def exit_code() -> int:
    """Run the command; its errors become one line on stderr and their exit code. A command
    that runs flows and did not print a verdict for each ends 2, saying so: never 0."""
    VERDICTS.reset()
    entry = COMMANDS.get(sys.argv[1]) if len(sys.argv) > 1 else None
    if entry is not None and entry.runs_flows:  # before its module loads, its options parse
        VERDICTS.expect()
    code, said, ended_by = _command_code()
    if VERDICTS.settled:
        return code
    if said and code in (ExitCode.ERROR, ExitCode.INTERRUPTED, ExitCode.TERMINATED):
        return code  # an error, an interrupt: their own line already says the run stopped
    click.echo(f"error: {VERDICTS.shortfall(ended_by)}", err=True)
    return ExitCode.ERROR


def _command_code() -> tuple[int, bool, SystemExit | None]:
    """The command's exit code, whether a line on stderr already said why it stopped, and
    the SystemExit that ended it, if one did."""
    try:
        code = cli.main(standalone_mode=False)
    except FlowproofError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code, True, None
    except click.exceptions.Abort:
        # click turns Ctrl-C (and end of input at a prompt) into Abort: an interrupt.
        click.echo("interrupted", err=True)
        return ExitCode.INTERRUPTED, True, None
    except click.ClickException as exc:
        exc.show()
        return ExitCode.ERROR, True, None
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return ExitCode.INTERRUPTED, True, None
    except SystemExit as exc:  # a command that ends with its verdict's code
        said = isinstance(exc, Terminated)  # the SIGTERM notice is printed
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or ExitCode.PASSED, said, exc
        click.echo(exc.code, err=True)
        return ExitCode.FAILED, True, exc
    return (code if isinstance(code, int) else ExitCode.PASSED), False, None


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
