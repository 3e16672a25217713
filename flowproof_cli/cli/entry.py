"""The `flowproof` console script: a Ctrl-C while Python is still loading flowproof ends it
quietly, with the interrupt's exit code.

Until `flowproof_cli.cli.main` is imported (click and the error tree: tens of milliseconds,
more on a loaded machine) no handler of flowproof's is in place, so an interrupt there
printed Python's KeyboardInterrupt traceback. Nothing has started by then (no agent, no
file, no listener), so ending at once loses nothing. Only the standard library here: this
module is itself part of that window.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: errors.ExitCode.INTERRUPTED, not imported: importing errors.py is part of the window.
INTERRUPTED_EXIT = 128 + signal.SIGINT


@contextmanager
def quiet_interrupts() -> Iterator[None]:
    """Within: SIGINT prints `interrupted` and exits 130. Only in place of Python's default
    handler: an ignored SIGINT (a background job) stays ignored, another handler stays."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, _interrupted_while_loading)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted_while_loading(signum: int, frame: FrameType | None) -> None:
    os.write(2, b"interrupted\n")
    os._exit(INTERRUPTED_EXIT)


def main() -> None:
    """The console script's entry point: the command, loaded with interrupts quiet; then an
    interrupt is remembered as well as raised (`remember_interrupts`)."""
    with quiet_interrupts():
        from flowproof_cli.cli.main import main as run_command  # noqa: PLC0415
    remember_interrupts()
    run_command()


def remember_interrupts() -> None:
    """Once flowproof is loaded (by the console script or `python -m flowproof_cli`): a
    Ctrl-C is remembered as well as raised (`errors.EarlyInterrupt`), so one that Python
    loses in a weakref callback still ends the run with 130. An ignored SIGINT (a background
    job) or another handler stays as it is."""
    from flowproof_cli.errors import EarlyInterrupt  # noqa: PLC0415 (loaded by then)

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, EarlyInterrupt.handler)
