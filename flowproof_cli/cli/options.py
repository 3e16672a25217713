"""Options shared by several commands, defined once."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


def trace_file_option(*names: str, help: str) -> Callable[[Any], Any]:
    """A trace file given on the command line: `record -o`, `run -t`."""
    return click.option(*names, type=click.Path(dir_okay=False, path_type=Path), help=help)


class Seconds(click.ParamType):
    """A finite number of seconds > 0. click's FloatRange lets `nan` through (every
    comparison with it is false), and `inf` or `1e400` would mean no timeout at all."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):
            self.fail(f"{value!r} is not a number of seconds > 0 (finite, e.g. 300)", param, ctx)
        return seconds


SECONDS = Seconds()
timeout_option = click.option(
    "--timeout",
    type=SECONDS,
    default=None,
    help="Seconds before the agent is killed (default: the spec's timeout, else 300).",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print a machine-readable result."
)
yes_option = click.option(
    "-y",
    "--yes",
    is_flag=True,
    help=(
        "Replace an existing trace whose trajectory changed without asking (its diff is "
        "still printed). Without it, record asks on the terminal, or with no terminal keeps "
        "the old trace and writes the new recording beside it as x.trace.candidate.yaml."
    ),
)
keep_going_option = click.option(
    "--keep-going",
    is_flag=True,
    help=(
        "After a divergence, let the agent run to its own end. Without it, the agent gets "
        "2 s to exit after the first divergence, then is stopped: later requests are "
        "refused and cannot change the verdict."
    ),
)
jobs_option = click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Flows run at once in a directory run, each in its own process with its own proxy.",
)
#: The values of `--fs-report` (flowproof_cli.egress.report.FS_REPORT_MODES, spelt out here so
#: that parsing the command line does not import the egress package).
FS_REPORT_MODES = ("full", "summary", "off")
fs_report_option = click.option(
    "--fs-report",
    type=click.Choice(FS_REPORT_MODES),
    default="summary",
    show_default=True,
    help=(
        "The filesystem observation report on stderr after a contained run: every syscall "
        "(full), counts and the first few when it is long (summary), or none (off). Blocked "
        "egress is printed in every mode."
    ),
)


def _output_flag(
    flag: str, short: str | None, setting: str, help_text: str
) -> Callable[[Any], Any]:
    """A flag that sets one field of cli/output.py's SETTINGS (imported only when given)."""

    def set_it(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            from flowproof_cli.cli.output import SETTINGS  # noqa: PLC0415

            setattr(SETTINGS, setting, True)

    names = (short, flag) if short else (flag,)
    return click.option(*names, is_flag=True, expose_value=False, callback=set_it, help=help_text)


quiet_option = _output_flag(
    "--quiet",
    "-q",
    "quiet",
    "Print only the verdict lines (failures included) and the summary: no notes, "
    "warnings or reports.",
)
verbose_option = _output_flag(
    "--verbose",
    "-v",
    "verbose",
    "In a directory run, also print each passing flow's egress containment tier and notes.",
)

all_changes_option = _output_flag(
    "--all-changes",
    None,
    "all_changes",
    "On a divergence, list every changed field of the request (its path over the canonical "
    "request, both values), not the first few and how many more.",
)


def agent_option(help_text: str) -> Callable[[Any], Any]:
    """`--agent CMD` of the commands that run an agent without a spec (doctor, init)."""
    return click.option("--agent", "command", required=True, metavar="CMD", help=help_text)


def agent_timeout_option(default: float) -> Callable[[Any], Any]:
    return click.option(
        "--timeout",
        type=SECONDS,
        default=default,
        show_default=True,
        help="Seconds before the agent is killed.",
    )
