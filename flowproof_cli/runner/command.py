"""The command driver: start the agent in its own process group, bound it in time, end it.

Everything the agent started dies with it: the whole group is signalled on timeout, on
cancellation and after a normal exit, so no grandchild outlives a flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from flowproof_cli.errors import AgentStartError

OUTPUT_TAIL = 4000  # characters of stdout/stderr kept for messages and reports
KILL_GRACE_S = 2.0


@dataclass(frozen=True)
class AgentOutcome:
    exit_code: int | None  # None when killed on timeout
    timed_out: bool
    stdout: str
    stderr: str
    duration_s: float

    def stderr_tail(self, lines: int = 15) -> str:
        return "\n".join(self.stderr.rstrip().splitlines()[-lines:])


def split_command(command: str) -> list[str]:
    """POSIX shell-word splitting: quotes and escapes as a shell would read them."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise AgentStartError(f"cannot parse agent.command {command!r}: {exc}") from exc
    if not argv:
        raise AgentStartError("agent.command is empty")
    return argv


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _drain(stream: asyncio.StreamReader | None) -> str:
    if stream is None:
        return ""
    chunks: list[bytes] = []
    size = 0
    while block := await stream.read(65536):
        chunks.append(block)
        size += len(block)
        while size > 4 * OUTPUT_TAIL and len(chunks) > 1:
            size -= len(chunks.pop(0))
    return b"".join(chunks).decode("utf-8", "replace")[-OUTPUT_TAIL:]


async def run_agent(
    argv: list[str], *, env: Mapping[str, str], cwd: Path, timeout_s: float
) -> AgentOutcome:
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise AgentStartError(f"cannot start the agent: {argv[0]!r} was not found") from exc
    except PermissionError as exc:
        raise AgentStartError(f"cannot start the agent: {argv[0]!r} is not executable") from exc
    except OSError as exc:
        raise AgentStartError(f"cannot start the agent {argv[0]!r}: {exc.strerror}") from exc

    pgid = process.pid
    readers = asyncio.gather(_drain(process.stdout), _drain(process.stderr))
    timed_out = False
    try:
        await asyncio.wait_for(process.wait(), timeout=timeout_s)
    except TimeoutError:
        timed_out = True
    finally:
        # On timeout, cancellation or a normal exit: end the whole group, politely first.
        _signal_group(pgid, signal.SIGTERM)
        if process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), timeout=KILL_GRACE_S)
        _signal_group(pgid, signal.SIGKILL)
        if process.returncode is None:
            await process.wait()
    try:
        stdout, stderr = await asyncio.wait_for(readers, timeout=KILL_GRACE_S)
    except TimeoutError:
        stdout, stderr = "", "(output not collected: a descendant kept the pipes open)"
    return AgentOutcome(
        exit_code=None if timed_out else process.returncode,
        timed_out=timed_out,
        stdout=stdout,
        stderr=stderr,
        duration_s=loop.time() - started,
    )
