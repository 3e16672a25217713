"""A conversation with a command agent: each user turn written to its stdin, each turn ended
by a line of its stdout.

The end of a turn is a signal from the agent, never a timing guess: the first line it
prints after the message that matches `agent.conversation.until` (an unterminated last
line, such as the prompt `input("> ")` writes, is matched as it stands). The next message
is written only after that, and the session's open turn moves with it, so every model call
belongs to exactly one turn at record and at replay. After the last turn flowproof closes
the agent's stdin; the agent must then exit as any agent does.

stdin and stdout are pipes of flowproof's own (`os.pipe`), read and written by the event
loop; asyncio's subprocess pipes are not used, since a grandchild that inherits one would
hold `Process.wait()` past the agent's exit. Everything the agent prints also goes to its
capture file, so the verdict quotes its output as for any agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import sys
import termios
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

from flowproof_cli.cassette import CassetteSession
from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.match.patterns import PatternBudgetExceeded, compile_pattern, within_budget
from flowproof_cli.process import tail_lines
from flowproof_cli.runner.simulated_user import UserSide
from flowproof_cli.runner.turn_outcome import TurnOutcome
from flowproof_cli.runner.url_driver import TriggerOutcome
from flowproof_cli.spec import FlowSpec
from flowproof_cli.spec.variables import resolve_handles

#: The handles `agent.conversation.send` may use.
MESSAGE_HANDLE = "message"
MESSAGE_JSON_HANDLE = "message_json"
#: Lines of the agent's output a failure quotes.
LAST_LINES = 8


@dataclass(frozen=True)
class UserMessage:
    """What the user says to open one turn."""

    text: str
    step: int  # the `user:` step it comes from (1-based among them)
    simulated: bool = False


#: The user's side: given the turns so far, the next message, or None when it is done.
NextMessage = Callable[[Sequence[TurnOutcome]], Awaitable[UserMessage | None]]


#: The escapes `send` may be written with, so that a single-quoted YAML value (which keeps a
#: backslash as written) ends its line as a double-quoted one does.
_ESCAPES = re.compile(r"\\[nrt\\]")
_ESCAPED = {"\\n": "\n", "\\r": "\r", "\\t": "\t", "\\\\": "\\"}


def rendered(send: str, message: str) -> bytes:
    """`agent.conversation.send` with the turn's message in it: its `\\n`, `\\r`, `\\t`
    and `\\\\` escapes read first (in the template, never in the message)."""
    send = _ESCAPES.sub(lambda escape: _ESCAPED[escape.group(0)], send)
    handles = {
        MESSAGE_HANDLE: message,
        MESSAGE_JSON_HANDLE: json.dumps(message, ensure_ascii=False),
    }
    return resolve_handles(send, handles).encode()


class _Output(asyncio.Protocol):
    """The agent's stdout: copied to its capture file, cut into lines for the dialogue."""

    def __init__(self, dialogue: Dialogue) -> None:
        self._dialogue = dialogue

    def data_received(self, data: bytes) -> None:
        self._dialogue.feed(data)


@dataclass
class Dialogue:
    """One conversation with a command agent (`run_agent` starts and ends it)."""

    next_message: NextMessage
    send: str
    until: re.Pattern[str]
    turn: OpenTurn  # the session's: moved on as each message is sent
    wait_first: bool = False
    turns: list[TurnOutcome] = field(default_factory=list)
    started: bool = False  # the first message was sent (or, with wait_first, awaited)
    waiting_first: bool = False
    finished: bool = False  # every turn ended and stdin was closed
    recent: list[str] = field(default_factory=list)  # the last lines printed, any turn
    stuck: str | None = None  # `until` ran past its budget: why the conversation stopped
    unread: int = 0  # bytes the agent left unread on its stdin when it ended

    def __post_init__(self) -> None:
        self._stdin_read, self._stdin_write = os.pipe()
        self._stdout_read, self._stdout_write = os.pipe()
        self._pending = bytearray()
        self._partial_ended = False  # the last bytes fed ended a turn without a newline
        self._active: TurnOutcome | None = None
        self._ended: asyncio.Event | None = None
        self._capture: IO[bytes] | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._reader: asyncio.ReadTransport | None = None
        self._task: asyncio.Task[None] | None = None
        self._probe: int | None = None  # a read end of stdin's pipe, to count unread

    def begin(self) -> None:
        """Called before the agent starts: without `wait_first` turn 1 is open from then
        on (its message follows as soon as the pipes are connected), so whatever the agent
        asks while it starts belongs to turn 1 at record and at replay alike, whenever the
        event loop gets to send the message; with `wait_first` it is before the first turn
        until the agent's first prompt."""
        if not self.wait_first:
            self.turn.begin(1)

    # -- the agent's side of the pipes -------------------------------------------------

    @property
    def child_stdin(self) -> int:
        return self._stdin_read

    @property
    def child_stdout(self) -> int:
        return self._stdout_write

    async def start(self, capture: IO[bytes]) -> None:
        """The agent has started: close its ends here, connect ours, begin the turns."""
        loop = asyncio.get_running_loop()
        # A read end of our own, never read: the agent's EOF needs every write end closed,
        # and with this one the unread bytes can still be counted after the agent is gone.
        self._probe = os.dup(self._stdin_read)
        os.close(self._stdin_read)
        os.close(self._stdout_write)
        self._capture = capture
        self._reader, _ = await loop.connect_read_pipe(
            lambda: _Output(self), os.fdopen(self._stdout_read, "rb", buffering=0)
        )
        self._writer, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(self._stdin_write, "wb", buffering=0)
        )
        self._task = asyncio.ensure_future(self._converse())

    def close(self) -> None:
        """The agent is gone: what it printed last read, the turns stopped, our ends closed."""
        if self._task is not None:
            self._task.cancel()
        if self._reader is not None:
            self._drain(self._reader.get_extra_info("pipe"))
        if self._probe is not None:  # the transport may have closed with the agent
            self.unread = _unread(self._probe)
            os.close(self._probe)
            self._probe = None
        for transport in (self._writer, self._reader):
            if transport is not None:
                transport.close()
        if self._task is None:  # never started: the agent's ends are still ours
            for fd in (self._stdin_read, self._stdin_write, self._stdout_read, self._stdout_write):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _drain(self, pipe: IO[bytes] | None) -> None:
        """Read what is still in the pipe (the reader is non-blocking: it stops at once when
        a descendant still holds the other end)."""
        if pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(pipe.fileno(), 65536):
                self.feed(chunk)

    # -- output ------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        if self._capture is not None:
            self._capture.seek(0, os.SEEK_END)
            self._capture.write(data)
        if self._partial_ended and data[:1] in (b"\n", b"\r"):
            # The end of the line that already ended a turn as it stood: a prompt and its
            # newline written apart (an unbuffered `print`) end the turn once, and the
            # newline is no empty line of the next turn's output.
            data = data[2:] if data.startswith(b"\r\n") else data[1:]
        self._partial_ended = False
        self._pending += data
        while (cut := self._pending.find(b"\n")) >= 0:
            line = self._pending[:cut].decode("utf-8", "replace").rstrip("\r")
            del self._pending[: cut + 1]
            self._line(line)
        if self._pending and self._listening:
            partial = self._pending.decode("utf-8", "replace")
            if self._matches(partial):  # a prompt written without a newline
                self._pending.clear()
                self._partial_ended = True
                self._line(partial)

    def _matches(self, line: str) -> bool:
        """Whether `line` ends the turn: `until` run within the budget of every declared
        pattern; past it the conversation stops (stdin closed) and the flow fails."""
        if self.stuck is not None:
            return False
        try:
            return bool(
                within_budget(
                    lambda: self.until.search(line),
                    kind="`until` pattern",
                    pattern=self.until.pattern,
                    declared="agent.conversation.until",
                    subject="a line the agent printed",
                )
            )
        except PatternBudgetExceeded as exc:
            self.stuck = str(exc)
            if self._writer is not None:
                self._writer.close()
            return False

    @property
    def _listening(self) -> bool:
        return self._ended is not None and not self._ended.is_set()

    def _line(self, line: str) -> None:
        self.recent = [*self.recent[-(LAST_LINES - 1) :], line]
        if not self._listening:
            return  # before the first message, or after a turn ended: no turn's
        assert self._ended is not None
        if self._matches(line):
            if self._active is not None:
                self._active.ended = True
            self._ended.set()
        elif self._active is not None:
            self._active.output.append(line)

    # -- the turns ---------------------------------------------------------------------

    async def _until_line(self) -> None:
        self._ended = asyncio.Event()
        if self._pending and self._matches(self._pending.decode("utf-8", "replace")):
            self._pending.clear()  # printed before we listened, unterminated: it counts
            self._partial_ended = True
            self._ended.set()
        await self._ended.wait()

    async def _converse(self) -> None:
        assert self._writer is not None
        if self.wait_first:
            self.waiting_first = True
            await self._until_line()
            self.waiting_first = False
        self.started = True
        while (message := await self.next_message(self.turns)) is not None:
            outcome = TurnOutcome(
                len(self.turns) + 1, message.text, message.step, message.simulated
            )
            self.turns.append(outcome)
            self._active = outcome
            self._ended = asyncio.Event()
            self.turn.open(outcome.number, message.text)
            self._writer.write(rendered(self.send, message.text))
            await self._ended.wait()
        self._active = None
        self._writer.close()  # EOF: the agent must now exit
        self.finished = True

    # -- what went wrong ---------------------------------------------------------------

    @property
    def open_turn(self) -> TurnOutcome | None:
        """The turn sent and not ended, if any."""
        return self.turns[-1] if self.turns and not self.turns[-1].ended else None

    def _unread_note(self) -> str:
        """Said when the agent left its message in the stdin pipe: it never read it."""
        if not self.unread:
            return ""
        return (
            f" (the agent never read its message: {self.unread} byte(s) of it wait unread on "
            "its stdin)"
        )

    def _last_lines(self) -> str:
        text = tail_lines("\n".join(self.recent), LAST_LINES)
        return f"; the last lines it printed:\n{text}" if text.strip() else "; it printed nothing"

    def problem(self, ending: str, timeout_s: float, exit_code: int | None) -> str | None:
        """Why the conversation failed, from how the agent's run ended (`run_agent`'s
        `exited`, `timed_out`, `stopped`), or None."""
        pattern = f"until {self.until.pattern!r}"
        turn = self.open_turn
        if self.stuck is not None:
            return f"{turn.label if turn else 'the conversation'}: {self.stuck}"
        if ending == "stopped" or (self.finished and ending == "exited"):
            return None
        if ending == "timed_out" and self.waiting_first:
            return (
                f"the agent did not print its first prompt within {timeout_s:g} s (wait_first: "
                f"no line matched {pattern}){self._last_lines()}"
            )
        if ending == "timed_out" and turn is not None:
            return (
                f"{turn.label} did not end within {timeout_s:g} s: no line the agent printed "
                f"after the message matched {pattern}{self._unread_note()}. {_BUFFER_HINT}"
                f"{self._last_lines()}"
            )
        if ending == "timed_out":
            return (
                f"the agent did not exit within {timeout_s:g} s after the conversation's last "
                "turn, when flowproof closed its stdin. Fix: end the agent at end of input"
            )
        code = f"with code {exit_code}"
        if turn is not None:
            return (
                f"the agent exited {code} during {turn.label}, before it ended the turn (no "
                f"line matched {pattern}){self._last_lines()}"
            )
        if not self.turns:
            return f"the agent exited {code} before the conversation's first turn was sent"
        return (
            f"the agent exited {code} after {len(self.turns)} of the conversation's turns, "
            f"before flowproof sent the next one{self._last_lines()}"
        )


def _unread(fd: int) -> int:
    """The bytes waiting in a pipe (FIONREAD answers on either end of it); 0 if unknown."""
    try:
        counted = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int.from_bytes(counted, sys.byteorder)


_BUFFER_HINT = (
    "Fix: make the agent print a line matching `until` when it has answered (a Python agent "
    "flushes it with print(..., flush=True) or input(); flowproof sets PYTHONUNBUFFERED=1)"
)


def user_side(spec: FlowSpec, session: CassetteSession, turn: OpenTurn) -> NextMessage:
    """The user's side of `spec`'s conversation: its written `user:` messages in order, a
    simulated `user:` played by a model at record and from the trace's user lane at replay
    (runner/simulated_user.py)."""
    side = UserSide(spec, session, turn)

    async def next_message(done: Sequence[TurnOutcome]) -> UserMessage | None:
        said = await side.next_message(done)
        return None if said is None else UserMessage(*said)

    return next_message


def conversation_of(spec: FlowSpec, session: CassetteSession) -> Dialogue | None:
    """The dialogue a conversation flow's command agent is driven with; None for one turn."""
    settings = spec.agent.conversation
    if not spec.is_conversation or settings is None or settings.until is None:
        return None
    if session.conversation is None:
        session.conversation = OpenTurn()
    return Dialogue(
        next_message=user_side(spec, session, session.conversation),
        send=settings.send,
        until=compile_pattern(settings.until),
        turn=session.conversation,
        wait_first=settings.wait_first,
    )


def unbuffered(env: Mapping[str, str]) -> dict[str, str]:
    """A conversation's agent environment: a Python agent's stdout unbuffered, so each
    turn's last line reaches flowproof when it is printed (unless the spec sets it)."""
    return {"PYTHONUNBUFFERED": "1", **env}


#: One turn's POST to a url agent: the message, and the turn's `conversation_id` and number.
Post = Callable[..., Awaitable[TriggerOutcome]]


async def converse_service(
    spec: FlowSpec, session: CassetteSession, post: Post, turns: list[TurnOutcome]
) -> TriggerOutcome:
    """A url agent's conversation: one POST per turn, each ended by its HTTP answer, the
    next sent only after it; `turns` filled as they go. The last answer is returned (the
    first that failed to arrive ends the conversation there)."""
    turn = session.conversation = session.conversation or OpenTurn()
    next_message = user_side(spec, session, turn)
    answer = TriggerOutcome(None, "", timed_out=False, error="no turn was sent")
    while (message := await next_message(turns)) is not None:
        outcome = TurnOutcome(len(turns) + 1, message.text, message.step, message.simulated)
        turns.append(outcome)
        turn.open(outcome.number, message.text)
        fields = {"conversation_id": turn.id, "turn": outcome.number}
        answer = await post(message.text, fields=fields)
        outcome.status, outcome.ended = answer.status, answer.status is not None
        outcome.output = answer.body.splitlines()
        if answer.status is None:  # unreachable or timed out: the driver says which
            break
    return answer
