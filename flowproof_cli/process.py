"""Child-process basics shared by the runner and egress containment: a command line split
into words, a process group signalled, a child's output cut to the tail quoted in messages,
and the keeper that cleans up after a flowproof that was killed.

It sits at the bottom of the import graph, so egress (which starts agents), the runner
(which owns them) and trace storage (which writes temporary files) all use it without
importing each other.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from flowproof_cli.errors import AgentStartError

OUTPUT_TAIL = 4000  # characters of stdout/stderr kept for messages and reports
TAIL_LINES = 15  # lines of a child's stderr quoted in a message

_DOUBLE_QUOTE_ESCAPABLE = frozenset('$`"\\\n')


def tail_lines(text: str, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a child's output, as quoted in flowproof's messages."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def file_tail(stream: IO[bytes], characters: int = OUTPUT_TAIL) -> str:
    """The last `characters` characters written to a capture file."""
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(max(0, size - 4 * characters))
    return stream.read().decode("utf-8", "replace")[-characters:]


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a whole process group; whether any member got it. A group already gone (or
    not ours) is no error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


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
            position = _double_quoted(command, position + 1, word)
            in_word = True
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


def _double_quoted(command: str, position: int, word: list[str]) -> int:
    """Append the text of a double-quoted run starting at `position` to `word`; return the
    position after its closing quote."""
    end = len(command)
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
    return position + 1


# -- the keeper ---------------------------------------------------------------------------

#: The keeper's whole program. It reads `[op, kind, value]` lines on stdin until flowproof's
#: end of the pipe closes, then ends what is still held. Run with -I -S: no site, no user
#: path, so it starts in milliseconds and imports nothing of the project.
_KEEPER_PROGRAM = r"""# flowproof keeper: ends what a killed flowproof left behind
import json, os, shutil, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
held = {"group": set(), "marker": set(), "path": set()}
pending = b""
while chunk := os.read(0, 65536):
    *lines, pending = (pending + chunk).split(b"\n")
    for line in lines:
        op, kind, value = json.loads(line)
        (held[kind].add if op == "+" else held[kind].discard)(value)
for pgid in held["group"]:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
markers = {os.fsencode(marker) for marker in held["marker"]}
for _ in range(3 if markers and os.path.isdir("/proc") else 0):
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/" + entry + "/environ", "rb") as stream:
                marked = not markers.isdisjoint(stream.read().split(b"\0"))
            if marked:
                os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.05)
for path in held["path"]:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass
"""

GROUP, MARKER, PATH = "group", "marker", "path"
_KEEPER_EXIT_S = 2.0  # at most this long to let the keeper finish at a normal exit


class Keeper:
    """A helper process that ends what flowproof leaves when it cannot clean up itself.

    A SIGKILL runs no `finally`: the agent, in a session of its own so that no signal meant
    for flowproof reaches it, would run on to its timeout, and the proxy's CA folder, the MCP
    stand-ins' session folder and a half-written trace's temporary file would stay. So each
    is held here while it exists: a process group, a marker (a `NAME=value` entry of the
    agent's environment, which its descendants inherit, held before the agent starts), a
    path. The keeper, started on first use in a session of its own, reads the list on a pipe
    only flowproof writes to; when that pipe closes (flowproof exited, however) it kills the
    groups and the marked processes still held and removes the paths. A clean run releases
    each one as it ends it, so the keeper then finds nothing to do.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None  # subprocess.Popen[bytes], imported lazily
        self._failed = False

    def pids(self) -> set[int]:
        """The keeper's pid (an empty set before it started): never an orphan to sweep."""
        return {self._process.pid} if self._process is not None else set()

    def hold(self, kind: str, value: int | str) -> None:
        """Until released, `value` is ended if flowproof dies."""
        self._send("+", kind, value)

    def release(self, kind: str, value: int | str) -> None:
        self._send("-", kind, value)

    @contextlib.contextmanager
    def holding(self, kind: str, value: int | str) -> Iterator[None]:
        self.hold(kind, value)
        try:
            yield
        finally:
            self.release(kind, value)

    def _send(self, op: str, kind: str, value: int | str) -> None:
        line = json.dumps([op, kind, value]).encode() + b"\n"
        with self._lock:
            if op == "+" and self._process is None and not self._failed:
                self._start()
            stdin = self._process.stdin if self._process is not None else None
            if stdin is None:
                return
            try:
                stdin.write(line)
                stdin.flush()
            except (OSError, ValueError):  # the keeper is gone: clean-up stays in-process
                self._failed, self._process = True, None

    def _start(self) -> None:
        import subprocess  # noqa: PLC0415 (only a run that holds something needs it)

        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _KEEPER_PROGRAM],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # no Ctrl-C or group signal meant for flowproof
            )
        except OSError:
            self._failed = True
            return
        atexit.register(self._stop)

    def _stop(self) -> None:
        """At a normal exit: close the pipe (the keeper finds nothing held) and reap it."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError, ValueError):
            process.stdin.close()
        with contextlib.suppress(Exception):
            process.wait(timeout=_KEEPER_EXIT_S)


KEEPER = Keeper()


# -- paths held from before they exist ------------------------------------------------------


def create_held[T](candidate: Callable[[], str], create: Callable[[str], T]) -> tuple[T, str]:
    """`create(name)` for a fresh name from `candidate()`, the keeper holding the name from
    before it exists, so no moment is left where a kill would orphan it (the run's first
    hold starts the keeper: a fork and exec wide). `create` raises FileExistsError for a
    name that is taken (someone else's: never ours to remove); another name is then tried."""
    while True:
        name = candidate()
        KEEPER.hold(PATH, name)
        try:
            return create(name), name
        except FileExistsError:
            KEEPER.release(PATH, name)
        except BaseException:
            KEEPER.release(PATH, name)
            raise


def held_temp_folder(prefix: str) -> str:
    """A new private folder under the system temp folder, held by the keeper until
    `remove_held_folder`."""
    import secrets  # noqa: PLC0415 (only a run that makes a folder needs them)
    import tempfile  # noqa: PLC0415

    base = tempfile.gettempdir()
    _, name = create_held(
        lambda: os.path.join(base, prefix + secrets.token_hex(4)),
        lambda name: os.mkdir(name, 0o700),
    )
    return name


def remove_held_folder(name: str) -> None:
    import shutil  # noqa: PLC0415

    shutil.rmtree(name, ignore_errors=True)
    KEEPER.release(PATH, name)
