"""Child-process basics shared by the runner and egress containment: a command line split
into words, a process group signalled, a child's output cut to the tail quoted in messages.

It sits at the bottom of the import graph, so egress (which starts agents) and the runner
(which owns them) both use it without importing each other.
"""

from __future__ import annotations

import os
import signal
from typing import IO

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
