"""A suite at run time: the environment its flows share, and the hooks around each flow.

The environment is built once per suite and run (so an `env_from` that fetches secrets runs
once, not once per flow): the process environment, then `env` (its `${VAR}` resolved from
that), then the `KEY=VALUE` lines `env_from` prints (run in the environment so far). It is
the environ each flow runs with, so it reaches the agent and every `${VAR}` in the spec.

Hooks are plain shell commands, run in the suite's folder with that environment and
`FLOWPROOF_SPEC` naming the flow's spec (and a marker the keeper ends them by). A failing
hook is reported, never raised: the caller decides whether it fails the flow
(`before_each`) and still runs `after_each` regardless.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from flowproof_cli.errors import ConfigError
from flowproof_cli.keeper import GROUP, MARKER
from flowproof_cli.match.build import Declared
from flowproof_cli.process import KEEPER, NUL, working_directory
from flowproof_cli.runner.command import tail_lines
from flowproof_cli.runner.termination import raising_on_sigterm
from flowproof_cli.spec.suite import load_suite
from flowproof_cli.spec.variables import resolve_variables

HOOK_TIMEOUT_S = 600.0  # a hook may start services; it may not hang a CI job forever
SHELL = "/bin/sh"

HookName = Literal["before_each", "after_each"]
#: In the environment of each suite command (hook or env_from) while it runs, unique to it.
HOOK_MARKER_VARIABLE = "FLOWPROOF_HOOK_RUN"
_ASSIGNMENT = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)")


@dataclass(frozen=True)
class Hooks:
    """The per-flow commands of one suite; JSON-able for the run record."""

    folder: str = "."
    before_each: str | None = None
    after_each: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "before_each": self.before_each,
            "after_each": self.after_each,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Hooks:
        return cls(data["folder"], data.get("before_each"), data.get("after_each"))


@dataclass(frozen=True)
class Suite:
    environ: dict[str, str]
    hooks: Hooks
    match: tuple[Declared, ...] = ()  # the suite's `match:` block, for every flow below it


def prepare_suite(path: Path | None, environ: Mapping[str, str]) -> Suite:
    """Load the suite at path (if any) and build its environment. Raises FlowproofError."""
    base = dict(environ)
    if path is None:
        return Suite(base, Hooks())
    suite = load_suite(path)
    folder = path.parent
    for name, value in suite.env.items():
        base[name] = resolve_variables(value, environ, where=f"{path} env.{name}")
    if suite.env_from is not None:
        base.update(_env_from(suite.env_from, path, base))
    match = (suite.match.declared(folder, "suite"),) if suite.match else ()
    return Suite(base, Hooks(str(folder), suite.before_each, suite.after_each), match)


def _env_from(command: str, suite_path: Path, environ: dict[str, str]) -> dict[str, str]:
    code, stdout, stderr = _shell(command, cwd=suite_path.parent, environ=environ)
    where = f"{suite_path}: env_from command `{command}`"
    if code is None:
        raise ConfigError(f"{where} did not finish within {HOOK_TIMEOUT_S:g} s and was killed")
    if code != 0:
        raise ConfigError(f"{where} exited with code {code}{_stderr_note(stderr)}")
    added: dict[str, str] = {}
    for number, line in enumerate(stdout.splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        match = _ASSIGNMENT.fullmatch(text)
        if match is None:
            raise ConfigError(
                f"{where} printed line {number} `{text}`, which is not KEY=VALUE. Fix: print "
                "only `KEY=VALUE` lines (blank lines and `#` comments are ignored)"
            )
        if "\x00" in match.group(2):
            raise ConfigError(
                f"{where} printed line {number} setting {match.group(1)} to a value that "
                f"holds the character {NUL}, which no environment variable can hold. Fix: "
                "print the value without it"
            )
        added[match.group(1)] = match.group(2)
    return added


async def run_hook(
    hooks: Hooks, name: HookName, spec_path: Path, environ: Mapping[str, str]
) -> str | None:
    """Run one hook for one flow; None when it succeeded (or there is none), else why not.

    Awaited in the run's event loop, beside the other flows; cancelled (a signal), it ends
    the hook's whole process group before the cancellation goes on."""
    command = hooks.before_each if name == "before_each" else hooks.after_each
    if command is None:
        return None
    env = {**environ, "FLOWPROOF_SPEC": str(spec_path.resolve())}
    code, stderr = await _hook_shell(command, cwd=Path(hooks.folder), environ=env)
    if code is None:
        return f"{name} hook `{command}` did not finish within {HOOK_TIMEOUT_S:g} s and was killed"
    if code != 0:
        return f"{name} hook `{command}` exited with code {code}{_stderr_note(stderr)}"
    return None


def _in_own_group(cwd: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    """How every suite command starts: in the suite's folder (and `PWD` naming it, not the
    folder flowproof was started from), no stdin, stderr kept, and a process group of its
    own (killed whole on timeout or interruption)."""
    return {
        "cwd": cwd,
        "env": {**environ, **working_directory(cwd)},
        "stdin": subprocess.DEVNULL,
        "stderr": subprocess.PIPE,
        "start_new_session": True,
    }


async def _hook_shell(
    command: str, *, cwd: Path, environ: Mapping[str, str]
) -> tuple[int | None, str]:
    """(exit code or None on timeout, stderr) of `sh -c command`, in its own group."""
    with _kept(environ) as env:
        process = await asyncio.create_subprocess_exec(
            SHELL, "-c", command, **_in_own_group(cwd, env), stdout=subprocess.DEVNULL
        )
        with KEEPER.holding(GROUP, process.pid):
            try:
                _, stderr = await asyncio.wait_for(process.communicate(), HOOK_TIMEOUT_S)
            except TimeoutError:
                await _end_hook_group(process)
                return None, ""
            except BaseException:
                await _end_hook_group(process)
                raise
    return process.returncode, stderr.decode(errors="replace")


@contextlib.contextmanager
def _kept(environ: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """The environment for one suite command, carrying a marker of its own that the keeper
    holds from before the spawn until the command is done: if flowproof dies meanwhile,
    however, every process carrying it is ended (its group is held too, once known)."""
    marker = secrets.token_hex(8)
    with KEEPER.holding(MARKER, f"{HOOK_MARKER_VARIABLE}={marker}"):
        yield {**environ, HOOK_MARKER_VARIABLE: marker}


async def _end_hook_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        await process.wait()


def _shell(command: str, *, cwd: Path, environ: Mapping[str, str]) -> tuple[int | None, str, str]:
    """(exit code or None on timeout, stdout, stderr) of `sh -c command`.

    The command gets its own process group, killed whole on timeout or interruption, so a
    background child of a hook can neither outlive it nor hold its pipes open.
    """
    with raising_on_sigterm():
        return _communicate(command, cwd=cwd, environ=environ)


def _communicate(
    command: str, *, cwd: Path, environ: Mapping[str, str]
) -> tuple[int | None, str, str]:
    with _kept(environ) as env:
        process = subprocess.Popen(
            [SHELL, "-c", command],
            **_in_own_group(cwd, env),
            stdout=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        with KEEPER.holding(GROUP, process.pid):
            try:
                stdout, stderr = process.communicate(timeout=HOOK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                return None, "", ""
            except BaseException:
                _kill_group(process)
                raise
    return process.returncode, stdout, stderr


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def _stderr_note(stderr: str) -> str:
    tail = tail_lines(stderr)
    return f"; its stderr ends with:\n{tail}" if tail else " (no stderr)"
