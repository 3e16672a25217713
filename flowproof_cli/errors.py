"""The one exception tree of flowproof, and the one place that maps it to exit codes.

    FlowproofError                 exit 2: flowproof could not do what was asked
    ├── SpecError                  a *.flow.yaml (or suite) is invalid; names file, line, fix
    ├── TraceError                 a trace is missing, unreadable or of an unknown version
    ├── ConfigError                the environment is missing something (an upstream, a port)
    └── AgentStartError            the agent command could not be started at all
    FlowFailure                    exit 1: the flow ran and a check failed (not an exception
                                   of flowproof itself; raised only to stop a flow early)

Verdicts (pass / fail) are values, not exceptions: see ``runner.verdict``.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes, shared by every command."""

    PASSED = 0
    FAILED = 1
    ERROR = 2


class FlowproofError(Exception):
    """flowproof could not do what was asked (exit 2)."""

    exit_code = ExitCode.ERROR


class SpecError(FlowproofError):
    """A spec file is invalid. The message names the file, the line and the fix."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        self.detail = message
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")


class TraceError(FlowproofError):
    """A trace is missing, unreadable, or written by an unknown format version."""


class ConfigError(FlowproofError):
    """Something flowproof needs from its environment is missing or wrong."""


class AgentStartError(FlowproofError):
    """The agent command could not be started (not found, not executable)."""


class FlowFailure(Exception):
    """The flow ran and failed a check (exit 1)."""

    exit_code = ExitCode.FAILED


def exit_code_for(exc: BaseException) -> ExitCode:
    """Map any exception to the exit code the CLI returns for it."""
    if isinstance(exc, FlowFailure):
        return ExitCode.FAILED
    return ExitCode.ERROR
