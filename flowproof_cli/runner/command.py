"""The command driver: start the agent in its own process group, bound it in time, end it.

Everything the agent started dies with it: the whole group is signalled on timeout, on
cancellation and after a normal exit, so no grandchild outlives a flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from flowproof_cli.errors import AgentStartError
from flowproof_cli.runner import orphans
from flowproof_cli.spec.variables import hold_handles, release_handles, resolve_variables

if TYPE_CHECKING:
    from flowproof_cli.egress import Launch

OUTPUT_TAIL = 4000  # characters of stdout/stderr kept for messages and reports
TAIL_LINES = 15  # lines of a child's stderr quoted in a message
KILL_GRACE_S = 2.0


def tail_lines(text: str, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a child's output, as quoted in flowproof's messages."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


@dataclass(frozen=True)
class AgentOutcome:
    exit_code: int | None  # None when killed on timeout
    timed_out: bool
    stdout: str
    stderr: str
    duration_s: float

    def stderr_tail(self, lines: int = TAIL_LINES) -> str:
        return tail_lines(self.stderr, lines)


_DOUBLE_QUOTE_ESCAPABLE = frozenset('$`"\\\n')


def split_command(command: str) -> list[str]:
    """POSIX shell-word splitting: quotes, escapes and line continuations as `sh` reads them.

    Python's shlex keeps the backslash of `\\$` and `\\``inside double quotes and keeps
    backslash-newline continuations, so this follows the POSIX rules itself. No expansion
    happens: `$`, globs and redirections are literal, as the command is not run by a shell.
    """
    words: list[str] = []
    word: list[str] = []
    in_word = False
    position, end = 0, len(command)
    while position < end:
        char = command[position]
        if char == "\\":
            following = command[position + 1 : position + 2]
            if following == "\n":
                position += 2
                continue
            if not following:
                raise AgentStartError(f"cannot parse agent.command {command!r}: trailing backslash")
            word.append(following)
            in_word, position = True, position + 2
        elif char == "'":
            closing = command.find("'", position + 1)
            if closing < 0:
                raise AgentStartError(f"cannot parse agent.command {command!r}: unclosed '")
            word.append(command[position + 1 : closing])
            in_word, position = True, closing + 1
        elif char == '"':
            position += 1
            while position < end and command[position] != '"':
                if command[position] == "\\" and command[position + 1 : position + 2] in (
                    _DOUBLE_QUOTE_ESCAPABLE
                ):
                    if command[position + 1] != "\n":
                        word.append(command[position + 1])
                    position += 2
                    continue
                word.append(command[position])
                position += 1
            if position >= end:
                raise AgentStartError(f'cannot parse agent.command {command!r}: unclosed "')
            in_word, position = True, position + 1
        elif char in " \t\n":
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            position += 1
        else:
            word.append(char)
            in_word, position = True, position + 1
    if in_word:
        words.append("".join(word))
    if not words:
        raise AgentStartError("agent.command is empty")
    return words


def resolve_argv(
    command: str,
    environ: Mapping[str, str],
    handles: Mapping[str, str],
    *,
    where: str = "agent.command",
) -> list[str]:
    """The argv of `command`: `${VAR}` substituted, then words split, then handles filled in.

    A handle's value lands inside the word it is written in and is never split again, so
    `--task ${flowproof.prompt}` passes the whole task, spaces and quotes included, as the
    one argument after `--task`. `${VAR}` keeps substituting before the split, as before.
    """
    template, held = hold_handles(command)
    words = split_command(resolve_variables(template, environ, where=where))
    return [release_handles(word, held, handles) for word in words]


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _end_group(process: asyncio.subprocess.Process, pgid: int) -> None:
    """End the whole group, politely first: on timeout, cancellation, error or normal exit.

    The SIGKILL sits in a `finally` of its own, so a second cancellation (a second Ctrl-C)
    arriving during the grace period still leaves no member of the group alive.
    """
    try:
        _signal_group(pgid, signal.SIGTERM)
        if process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), timeout=KILL_GRACE_S)
    finally:
        _signal_group(pgid, signal.SIGKILL)
        if process.returncode is None:
            await process.wait()


def _tail(stream: IO[bytes]) -> str:
    """The last OUTPUT_TAIL characters written to a capture file."""
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(max(0, size - 4 * OUTPUT_TAIL))
    return stream.read().decode("utf-8", "replace")[-OUTPUT_TAIL:]


async def run_agent(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    launch: Launch | None = None,
) -> AgentOutcome:
    """Run the agent; with `launch`, under egress containment (see flowproof_cli.egress)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    adopts_orphans = orphans.become_subreaper()
    children_before = orphans.children() if adopts_orphans else set()
    # Output goes to files, not pipes: a grandchild that inherits a pipe would keep
    # asyncio's wait() from returning after the agent itself exited.
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        try:
            process = await asyncio.create_subprocess_exec(
                *(launch.wrap(argv) if launch is not None else argv),
                env=dict(env),
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                pass_fds=launch.pass_fds if launch is not None else (),
            )
        except FileNotFoundError as exc:
            raise AgentStartError(f"cannot start the agent: {argv[0]!r} was not found") from exc
        except PermissionError as exc:
            raise AgentStartError(f"cannot start the agent: {argv[0]!r} is not executable") from exc
        except OSError as exc:
            raise AgentStartError(f"cannot start the agent {argv[0]!r}: {exc.strerror}") from exc

        pgid = process.pid
        timed_out = False
        try:
            if launch is not None:
                await launch.attach(process.pid)  # filter handed over, then the agent exec'd
            await asyncio.wait_for(process.wait(), timeout=timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            await _end_group(process, pgid)
            if adopts_orphans:
                await asyncio.to_thread(orphans.end_adopted, children_before, {process.pid})
        stdout_text, stderr_text = _tail(stdout), _tail(stderr)
    return AgentOutcome(
        exit_code=None if timed_out else process.returncode,
        timed_out=timed_out,
        stdout=stdout_text,
        stderr=stderr_text,
        duration_s=loop.time() - started,
    )
