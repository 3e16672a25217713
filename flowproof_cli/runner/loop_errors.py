"""Errors the event loop and the proxy engine log: one line per kind, with a count.

asyncio reports an unhandled error of a task or callback to its logger with a traceback;
mitmproxy's own errors go to its loggers the same way. While mitmproxy runs it catches those
records itself, but before it starts and after it stops nothing does, and Python prints each
record whole to stderr. One fault repeated (a thousand connections torn down, an accept
retried for each queued connection) became thousands of tracebacks. `QuietLog` takes those
records instead, once installed: the first of each kind is one line, and the count is said
again at 10, 100, 1000... occurrences, so a stream of N errors prints about log10(N) lines.
A program that configured logging itself (pytest, an embedding application) keeps it: the
records then go to its handlers, as before.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from typing import IO

#: The loggers whose records this handles.
LOGGERS = ("asyncio", "mitmproxy")
#: Kinds said at most; a run with more says so once.
MAX_KINDS = 20
_VOLATILE = re.compile(r"\s*(<.*|at 0x[0-9a-f]+.*|\(.*)$", re.DOTALL)


def kind_of(record: logging.LogRecord) -> str:
    """What makes two records the same error: the logger, the message without the object
    it names (addresses, handles), and the exception's type."""
    first = record.getMessage().splitlines()[0] if record.getMessage() else ""
    message = _VOLATILE.sub("", first)[:120] or first[:120]
    exc = record.exc_info[1] if record.exc_info else None
    raised = f": {type(exc).__name__}" if exc is not None else ""
    return f"{record.name}: {message}{raised}"


def _configured() -> bool:
    """Whether logging has a handler at its root (mitmproxy's while it runs, pytest's...)."""
    return bool(logging.getLogger().handlers)


class QuietLog(logging.Handler):
    def __init__(
        self, stream: IO[str] | None = None, configured: Callable[[], bool] = _configured
    ) -> None:
        super().__init__(logging.WARNING)
        self._stream = stream
        self._configured = configured
        self.counts: dict[str, int] = {}
        self._overflowed = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._configured():
            return  # logging is configured (mitmproxy's own, while it runs): it is theirs
        try:
            kind = kind_of(record)
            if kind not in self.counts and len(self.counts) >= MAX_KINDS:
                if not self._overflowed:
                    self._overflowed = True
                    self._say(f"flowproof: more kinds of error than {MAX_KINDS}, not shown")
                return
            count = self.counts.get(kind, 0) + 1
            self.counts[kind] = count
            if count == 1:
                self._say(f"flowproof: {kind}{_detail(record)}")
            elif _is_power_of_ten(count):
                self._say(f"flowproof: {kind} ({count} times so far)")
        except Exception:  # a log handler never raises into the code that logged
            self.handleError(record)

    def _say(self, line: str) -> None:
        stream = self._stream or sys.stderr
        try:
            stream.write(line + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass


def _detail(record: logging.LogRecord) -> str:
    exc = record.exc_info[1] if record.exc_info else None
    text = " ".join(str(exc).split())[:200] if exc is not None else ""
    return f" ({text})" if text else ""


def _is_power_of_ten(count: int) -> bool:
    while count >= 10 and count % 10 == 0:
        count //= 10
    return count == 1


_INSTALLED: QuietLog | None = None


def install() -> QuietLog:
    """Attach the one QuietLog to the loggers it serves (idempotent, for the process)."""
    global _INSTALLED  # noqa: PLW0603 (one handler per process, like the loggers it serves)
    if _INSTALLED is None:
        _INSTALLED = QuietLog()
        for name in LOGGERS:
            logging.getLogger(name).addHandler(_INSTALLED)
    return _INSTALLED
