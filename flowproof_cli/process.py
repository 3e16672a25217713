"""Child-process basics shared by the runner and egress containment: a command line split
into words, a process group signalled, a child's output cut to the tail quoted in messages,
the keeper that cleans up after a flowproof that was killed, and the files written whole
or not at all whose temporary files it holds (`write_atomic`).

It sits at the bottom of the import graph, so egress (which starts agents), the runner
(which owns them), trace storage and the providers' cached files (which write temporary
files) all use it without importing each other.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from flowproof_cli.errors import AgentStartError
from flowproof_cli.keeper import PATH

OUTPUT_TAIL = 4000  # characters of stdout/stderr kept for messages and reports
TAIL_LINES = 15  # lines of a child's stderr quoted in a message
#: The most of one capture file `assert: output ...` judges (its last part, when longer): an
#: agent's own output, whole for any agent that does not print a log of this size.
OUTPUT_WHOLE = 32 * 1024 * 1024

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


def file_text(stream: IO[bytes], limit: int = OUTPUT_WHOLE) -> str:
    """Everything written to a capture file (its last `limit` bytes, past that)."""
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(max(0, size - limit))
    return stream.read().decode("utf-8", "replace")


def joined_output(stdout: str, stderr: str) -> str:
    """An agent's stdout then its stderr, as one text (a newline between them)."""
    if stdout and stderr and not stdout.endswith("\n"):
        return f"{stdout}\n{stderr}"
    return stdout + stderr


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a whole process group; whether any member got it. A group already gone (or
    not ours) is no error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


#: The shell's idea of the working directory, which a child inherits like any variable.
WORKING_DIRECTORY_VARIABLE = "PWD"


def working_directory(cwd: str | os.PathLike[str]) -> dict[str, str]:
    """`PWD` for a process started in `cwd`: that folder, absolute, its symbolic links
    resolved, as `os.getcwd()` reports it there (and as relocation stores `{cwd}`).

    Without it a child inherits its parent's `PWD`, the folder flowproof was started from,
    while it runs elsewhere (an agent in its spec's folder, a real MCP server in its flow's,
    a hook in its suite's); whatever takes its working directory from `PWD` (a shell script,
    opencode) then puts the caller's folder into its requests, and a trace depends on where
    flowproof was started."""
    return {WORKING_DIRECTORY_VARIABLE: os.path.realpath(cwd)}


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


# -- what exec can carry ------------------------------------------------------------------

#: Linux's limit on ONE argument or ONE `NAME=value` environment string, its final NUL
#: included (MAX_ARG_STRLEN: 32 pages of 4 KiB). Other systems limit only the total, but a
#: spec is held to this everywhere, so it cannot pass on a laptop and fail on a Linux CI.
MAX_ARG_STRLEN = 32 * 4096
ARG_LIMIT = (
    f"Linux limits one argument or environment string to {MAX_ARG_STRLEN:,} bytes "
    "(MAX_ARG_STRLEN, 128 KiB)"
)
NUL = "U+0000 (NUL)"
#: How to hand an agent more than one argument carries.
BIG_DATA_FIX = (
    "Fix: pass large data in a file: the task is always in the file named by "
    "FLOWPROOF_PROMPT_FILE (`${flowproof.prompt_file}` in agent.command or agent.env)"
)


def encoded_size(text: str) -> int:
    """Bytes of `text` as exec receives it (the filesystem encoding), its NUL included."""
    return len(os.fsencode(text)) + 1


def fits_one_string(text: str) -> bool:
    """`text` (an argument, or `NAME=value`) is within MAX_ARG_STRLEN."""
    return len(text) < MAX_ARG_STRLEN // 4 or encoded_size(text) <= MAX_ARG_STRLEN


def env_name_problem(name: str) -> str | None:
    """Why `name` cannot be a variable of a process environment, or None."""
    if "\x00" in name:
        return f"{name!r} holds the character {NUL}"
    if not name or name.startswith("="):
        return "is empty" if not name else f"`{name}` is empty before its `=`"
    if "=" in name:
        return (
            f"`{name}` holds `=`, which ends a name in the environment (`{name}=v` would set "
            f"`{name.split('=', 1)[0]}`)"
        )
    return None


def _word_problem(word: str, what: str) -> str | None:
    if "\x00" in word:
        return (
            f"{what} holds the character {NUL}, which exec cannot pass (it ends every "
            "argument and environment string). Fix: remove it where the value is set"
        )
    try:
        size = encoded_size(word)
    except UnicodeEncodeError as exc:
        return (
            f"{what} holds U+{ord(word[exc.start]):04X}, a lone surrogate, which no UTF-8 "
            "text can carry. Fix: remove it where the value is set"
        )
    if size > MAX_ARG_STRLEN:
        return f"{what} is {size:,} bytes; {ARG_LIMIT}. {BIG_DATA_FIX}"
    return None


def exec_problem(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Why exec would refuse this command line and environment, naming the argument or the
    variable; None when each string can pass (the total is the kernel's to judge: E2BIG)."""
    for index, word in enumerate(argv):
        problem = _word_problem(word, f"argument {index} of its command line")
        if problem is not None:
            return problem
    for name, value in env.items():
        bad_name = env_name_problem(name)
        if bad_name is not None:
            return f"the environment variable name {bad_name}. Fix: rename it where it is set"
        problem = _word_problem(f"{name}={value}", f"the environment variable {name}")
        if problem is not None:
            return problem
    return None


def too_big_together(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """Why exec said E2BIG when no single string is too long: their total."""
    total = sum(encoded_size(word) for word in argv)
    total += sum(encoded_size(f"{name}={value}") for name, value in env.items())
    largest = max(env.items(), key=lambda item: len(item[1]), default=("", ""))
    limit = os.sysconf("SC_ARG_MAX") if hasattr(os, "sysconf") else 0
    return (
        f"its command line and environment are {total:,} bytes together, over the system's "
        f"limit ({limit:,} bytes, ARG_MAX); the largest variable is {largest[0]}. {BIG_DATA_FIX}"
    )


# -- the keeper ---------------------------------------------------------------------------

#: The keeper's program (keeper.py), run as a script with -I -S: no site, no user path, so
#: it starts in milliseconds and imports nothing of the project.
_KEEPER_PROGRAM = str(Path(__file__).with_name("keeper.py"))

_KEEPER_EXIT_S = 2.0  # at most this long to let the keeper finish at a normal exit


class Keeper:
    """A helper process that ends what flowproof leaves when it cannot clean up itself.

    A SIGKILL runs no `finally`: the agent, in a session of its own so that no signal meant
    for flowproof reaches it, would run on to its timeout, and the proxy's CA folder, the MCP
    stand-ins' session folder and a half-written trace's temporary file would stay. So each
    is held here while it exists: a process group, a marker (a `NAME=value` entry of the
    agent's environment, which its descendants inherit, held before the agent starts), an
    agent's cgroup (everything in it is killed, then it is removed: `runner/cgroups.py`), a
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
                [sys.executable, "-I", "-S", _KEEPER_PROGRAM],
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


def create_held[T](
    candidate: Callable[[], str], create: Callable[[str], T], kind: str = PATH
) -> tuple[T, str]:
    """`create(name)` for a fresh name from `candidate()`, the keeper holding the name (as
    `kind`) from before it exists, so no moment is left where a kill would orphan it (the
    run's first hold starts the keeper: a fork and exec wide). `create` raises
    FileExistsError for a name that is taken (someone else's: never ours to remove); another
    name is then tried."""
    while True:
        name = candidate()
        KEEPER.hold(kind, name)
        try:
            return create(name), name
        except FileExistsError:
            KEEPER.release(kind, name)
        except BaseException:
            KEEPER.release(kind, name)
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


# -- files written whole or not at all ------------------------------------------------------


def write_atomic(path: Path, text: str) -> None:
    """Write a complete file or nothing: temp file, fsync, rename. The temp file is held by
    the keeper meanwhile, so a flowproof killed mid-write (no `except` runs) leaves none."""
    commit_staged(stage(path, text), path)


def stage(path: Path, text: str) -> Path:
    """`text`, complete and fsynced, in a new temporary file beside `path`, which it will
    replace (`commit_staged`) or never touch (`discard_staged`). The keeper holds the file
    until then, so a flowproof killed before either leaves none behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = _held_temp(path)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
    except BaseException:
        discard_staged(Path(temp_name))
        raise
    return Path(temp_name)


def commit_staged(staged: Path, path: Path) -> None:
    """Move a staged file over `path` in one rename; on failure it is removed."""
    try:
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        raise
    finally:
        KEEPER.release(PATH, str(staged))


def discard_staged(staged: Path) -> None:
    """Remove a staged file that will not be committed."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staged)
    KEEPER.release(PATH, str(staged))


def _held_temp(path: Path) -> tuple[int, str]:
    """A new `.NAME.XXXXXXXX.tmp` beside `path`, held by the keeper before it exists (so
    no moment is left where a kill would orphan it)."""
    import secrets  # noqa: PLC0415 (only a run that writes a file needs it)

    return create_held(
        lambda: str(path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")),
        lambda name: os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
    )
