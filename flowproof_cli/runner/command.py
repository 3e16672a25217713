"""The command driver: start the agent in its own process group, bound it in time, end it.

Everything the agent started dies with it: the whole group is signalled on timeout, on
cancellation and after a normal exit, so no grandchild outlives a flow; where the platform
allows, the agent also starts in a cgroup of its own (`runner/cgroups.py`), which ends even
a descendant that left the group and cleared its environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import signal
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from flowproof_cli.errors import AgentStartError
from flowproof_cli.keeper import GROUP, MARKER
from flowproof_cli.process import (
    KEEPER,
    TAIL_LINES,
    exec_problem,
    file_text,
    joined_output,
    split_command,
    tail_lines,
    too_big_together,
)
from flowproof_cli.process import file_tail as _tail
from flowproof_cli.process import signal_group as _signal_group
from flowproof_cli.runner import orphans
from flowproof_cli.runner.cgroups import AgentCgroup
from flowproof_cli.runner.descriptors import FIX, out_of_descriptors
from flowproof_cli.runner.environment import ORPHAN_MARKER_VARIABLE
from flowproof_cli.spec.variables import hold_handles, release_handles, resolve_variables

if TYPE_CHECKING:
    from flowproof_cli.egress import Launch
    from flowproof_cli.runner.conversation import Dialogue

KILL_GRACE_S = 2.0
#: Seconds an agent may go on after the first divergence of a replay before it is stopped.
#: The verdict is settled then (every later request is refused, and cannot change it), but
#: an agent that retries the refusal, ignoring `x-should-retry: false`, would hold the run
#: to its timeout; one that handles the refusal exits well within this. `--keep-going`
#: lets the agent run to its own end instead.
DIVERGENCE_GRACE_S = 2.0


@dataclass(frozen=True)
class AgentOutcome:
    exit_code: int | None  # None when killed on timeout or stopped after the verdict
    timed_out: bool
    stdout: str  # the last OUTPUT_TAIL characters, for messages and reports
    stderr: str
    duration_s: float
    #: Its stdout then its stderr, whole (`assert: output ...` judges this).
    output: str = ""
    stopped: bool = False  # stopped by flowproof once the verdict was settled (`settled`)
    #: A conversation's failure (runner/conversation.py `Dialogue.problem`), if any.
    conversation_problem: str | None = None
    #: The conversation turn that was open and never ended, when the agent's run ended.
    open_turn: int | None = None

    def stderr_tail(self, lines: int = TAIL_LINES) -> str:
        return tail_lines(self.stderr, lines)


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


def _cannot_start(
    program: str,
    exc: OSError,
    argv: list[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> AgentStartError:
    if (exhausted := out_of_descriptors(exc)) is not None:
        return AgentStartError(f"cannot start the agent {program!r}: {exhausted}. {FIX}")
    if exc.errno == errno.E2BIG and argv is not None and env is not None:
        return AgentStartError(f"cannot start the agent: {too_big_together(argv, env)}")
    if isinstance(exc, FileNotFoundError):
        return AgentStartError(f"cannot start the agent: {program!r} was not found")
    if isinstance(exc, PermissionError):
        return AgentStartError(f"cannot start the agent: {program!r} is not executable")
    return AgentStartError(f"cannot start the agent {program!r}: {exc.strerror}")


def _marker(env: Mapping[str, str]) -> str | None:
    """The entry of the agent's environment that every descendant inherits: the proxy URL,
    unique to this flow's listener while it runs."""
    url = env.get(ORPHAN_MARKER_VARIABLE)
    return f"{ORPHAN_MARKER_VARIABLE}={url}" if url else None


async def _end_own_orphans(env: Mapping[str, str], before: set[int], agent_pid: int) -> None:
    """End the orphans of this agent's tree, told from another flow's by its marker. No
    wait for orphans still being reparented: the run's last sweep ends those."""
    marker = _marker(env)
    end = functools.partial(orphans.end_adopted, settle=False)
    await asyncio.to_thread(end, before, {agent_pid}, marker.encode() if marker else None)


async def _end_cgroup(cgroup: AgentCgroup | None) -> None:
    """Kill what is left in the agent's cgroup and remove it (a thread: it waits for them)."""
    if cgroup is not None:
        await asyncio.to_thread(cgroup.end)


async def _end_group(process: asyncio.subprocess.Process, pgid: int) -> None:
    """End the whole group, politely first: on timeout, cancellation, error or normal exit.

    The SIGKILL sits in a `finally` of its own, so a second cancellation (a second Ctrl-C)
    arriving during the grace period still leaves no member of the group alive.
    """
    try:
        if _signal_group(pgid, signal.SIGTERM):  # members left: their orphans are in flight
            orphans.note_dying()
        if process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), timeout=KILL_GRACE_S)
    finally:
        _signal_group(pgid, signal.SIGKILL)
        if process.returncode is None:
            await process.wait()


def _output_file(program: str) -> IO[bytes]:
    """A temporary file for the agent's stdout or stderr (an AgentStartError if none can be
    made: out of descriptors, a full disk)."""
    try:
        return tempfile.TemporaryFile()
    except OSError as exc:
        raise _cannot_start(program, exc) from exc


async def _spawn(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    launch: Launch | None,
    outputs: tuple[IO[bytes] | int, IO[bytes]],
    cgroup: AgentCgroup | None = None,
    stdin: int = asyncio.subprocess.DEVNULL,
) -> asyncio.subprocess.Process:
    """Start the agent in its own session (and `cgroup`), contained when `launch` is given.
    What exec cannot carry (a NUL, a name with `=`, a string over MAX_ARG_STRLEN) is refused
    first, naming the argument or the variable."""
    problem = exec_problem(argv, env)
    if problem is not None:
        raise AgentStartError(f"cannot start the agent: {problem}")
    if launch is not None:
        launch.start_handshake()  # the agent must not wait for this loop to exec
    try:
        return await asyncio.create_subprocess_exec(
            *(launch.wrap(argv) if launch is not None else argv),
            env=dict(env),
            cwd=cwd,
            stdin=stdin,
            stdout=outputs[0],
            stderr=outputs[1],
            start_new_session=True,
            pass_fds=launch.pass_fds if launch is not None else (),
            # Joined in the child before exec, so no descendant is ever outside it. Three
            # system calls, no lock taken: safe beside the loop's threads.
            preexec_fn=cgroup.join if cgroup is not None else None,
        )
    except OSError as exc:
        raise _cannot_start(argv[0], exc, argv, env) from exc


async def _after(settled: asyncio.Event, grace_s: float) -> None:
    await settled.wait()
    await asyncio.sleep(grace_s)


async def _wait(
    process: asyncio.subprocess.Process,
    timeout_s: float,
    settled: asyncio.Event | None,
    grace_s: float,
) -> str:
    """How the agent's run ended: `exited`, `timed_out` (`timeout_s` passed), or `stopped`
    (`settled` was set, and `grace_s` passed after it without the agent exiting)."""
    exited = asyncio.ensure_future(process.wait())
    waiters: set[asyncio.Future[Any]] = {exited}
    if settled is not None:
        waiters.add(asyncio.ensure_future(_after(settled, grace_s)))
    try:
        done, _ = await asyncio.wait(
            waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for waiter in waiters:
            waiter.cancel()
    if exited in done:
        return "exited"
    return "stopped" if done else "timed_out"


async def _started(
    spawn: Callable[..., Awaitable[asyncio.subprocess.Process]],
    outputs: tuple[IO[bytes], IO[bytes]],
    cgroup: AgentCgroup | None,
    dialogue: Dialogue | None,
) -> asyncio.subprocess.Process:
    """The agent spawned with its outputs, or with a dialogue's pipes for stdin and stdout
    (its output still copied to the capture file); nothing left behind when it fails."""
    try:
        if dialogue is None:
            return await spawn(outputs=outputs)
        dialogue.begin()  # before the agent can make a call: it belongs to a turn
        process = await spawn(
            outputs=(dialogue.child_stdout, outputs[1]), stdin=dialogue.child_stdin
        )
        await dialogue.start(outputs[0])
        return process
    except BaseException:
        if dialogue is not None:
            dialogue.close()
        await _end_cgroup(cgroup)
        raise


async def run_agent(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    launch: Launch | None = None,
    settled: asyncio.Event | None = None,
    grace_s: float = DIVERGENCE_GRACE_S,
    dialogue: Dialogue | None = None,
) -> AgentOutcome:
    """Run the agent; with `launch`, under egress containment (see flowproof_cli.egress);
    with `dialogue`, as a conversation over its stdin and stdout.

    Once `settled` is set (the replay's first divergence settled the verdict), the agent has
    `grace_s` to exit by itself; then it is stopped the way a timeout stops it."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    adopts_orphans = orphans.become_subreaper()
    children_before = orphans.children() if adopts_orphans else set()
    # Output goes to files, not asyncio's pipes (a grandchild holding one would keep wait()
    # from returning). The keeper holds the marker and the group: a killed flowproof's too.
    marker = _marker(env)
    with (
        _output_file(argv[0]) as stdout,
        _output_file(argv[0]) as stderr,
        KEEPER.holding(MARKER, marker) if marker else contextlib.nullcontext(),
    ):
        cgroup = AgentCgroup.make()  # held by the keeper from before it exists
        spawn = functools.partial(_spawn, argv, env=env, cwd=cwd, launch=launch, cgroup=cgroup)
        process = await _started(spawn, (stdout, stderr), cgroup, dialogue)
        pgid = process.pid
        KEEPER.hold(GROUP, pgid)
        ending = "timed_out"
        try:
            if launch is not None:
                await launch.attach(process.pid)  # filter handed over, then the agent exec'd
            ending = await _wait(process, timeout_s, settled, grace_s)
        finally:
            try:
                await _end_group(process, pgid)
            finally:
                KEEPER.release(GROUP, pgid)  # SIGKILLed by now: a pgid free for reuse
                await _end_cgroup(cgroup)  # what left the group, its environment cleared
            if adopts_orphans:
                await _end_own_orphans(env, children_before, process.pid)
            if dialogue is not None:
                dialogue.close()
        stdout_text, stderr_text = _tail(stdout), _tail(stderr)
        output = joined_output(file_text(stdout), file_text(stderr))
    return AgentOutcome(
        exit_code=process.returncode if ending == "exited" else None,
        timed_out=ending == "timed_out",
        stdout=stdout_text,
        stderr=stderr_text,
        duration_s=loop.time() - started,
        output=output,
        stopped=ending == "stopped",
        **_conversation_outcome(dialogue, ending, timeout_s, process.returncode),
    )


def _conversation_outcome(
    dialogue: Dialogue | None, ending: str, timeout_s: float, exit_code: int | None
) -> dict[str, Any]:
    """A conversation's part of the outcome: what went wrong, and the turn left open."""
    if dialogue is None:
        return {}
    turn = dialogue.open_turn
    return {
        "conversation_problem": dialogue.problem(ending, timeout_s, exit_code),
        "open_turn": turn.number if turn is not None else None,
    }
