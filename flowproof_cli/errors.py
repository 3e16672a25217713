"""The one exception tree of flowproof, and the one place that maps it to exit codes.

    FlowproofError                 exit 2: flowproof could not do what was asked
    ├── SpecError                  a *.flow.yaml (or suite) is invalid; names file, line, fix
    ├── TraceError                 a trace is missing, unreadable or of an unknown version
    ├── ConfigError                the environment is missing something (an upstream, a port)
    │   └── PortInUseError         a fixed port flowproof must bind is taken
    ├── AgentStartError            the agent command could not be started at all
    └── ContainmentError           egress containment was set up and its handover failed
    Terminated (SystemExit)        exit 143: SIGTERM ended the run after its cleanup ran
    (KeyboardInterrupt)            exit 130: Ctrl-C; the CLI maps it, Python raises it

Verdicts (pass / fail, exit 0 / 1) are values, not exceptions: see ``flowproof_cli.verdict``.
`flowproof match learn` ends the same way: 0 when the rules it learned make its two runs'
requests equal (checked), 1 when the runs could not be made equal (a run failed, they made
different numbers of requests, a difference no rule removes: values, in
``flowproof_cli.cassette.learn.Learned``), 2 for an error of the tree above (no spec, no
upstream, a folder it cannot copy).
Modules that raise a narrower error of their own subclass one of these (for example
``match.rules.MatcherAddonError``), so the CLI's one handler covers them.
"""

from __future__ import annotations

import signal
from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes, shared by every command."""

    PASSED = 0
    FAILED = 1
    ERROR = 2
    INTERRUPTED = 128 + signal.SIGINT  # 130: the shell's convention for a run ended by Ctrl-C
    TERMINATED = 128 + signal.SIGTERM  # 143: the same convention for SIGTERM


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


class PortInUseError(ConfigError):
    """The fixed port asked for is taken: a named error, not a 10 s start timeout.

    The proxy raises it with the bare port; whoever chose the port (a spec's `proxy_port`,
    an MCP server's `port`) re-raises it with the message that names that key."""

    def __init__(self, port: int, message: str | None = None):
        self.port = port
        super().__init__(
            message
            or f"127.0.0.1:{port} is already in use. Fix: stop whatever listens there, "
            "or choose another port"
        )


class SpecExistsError(FlowproofError):
    """`flowproof init` never replaces a spec: it may hold the user's own work."""


class AgentStartError(FlowproofError):
    """The agent command could not be started (not found, not executable)."""


class ContainmentError(FlowproofError):
    """Containment was available, the filter was installed, and the handover failed."""


class Terminated(SystemExit):
    """Raised from a flow cancelled by SIGTERM, after its cleanup ran.

    A SystemExit, not a FlowproofError: it must pass every handler of flow errors, so a
    directory run does not go on to the next flow."""

    def __init__(self) -> None:
        super().__init__(ExitCode.TERMINATED)


class EarlyInterrupt:
    """A Ctrl-C before a run's event loop took SIGINT over, remembered.

    Python raises KeyboardInterrupt wherever the main thread is; when that is a weakref
    callback or a `__del__` (an import's module lock, say) the exception is printed as
    "Exception ignored" and lost, and the run went on to exit 0. The console script installs
    `handler` once flowproof is loaded; the run's loop (`runner.termination`) ends with
    KeyboardInterrupt (exit 130) when an interrupt came before it, lost or not."""

    pressed = False

    @staticmethod
    def handler(signum: int, frame: object) -> None:
        EarlyInterrupt.pressed = True
        raise KeyboardInterrupt
