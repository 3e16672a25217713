"""The bound of each MCP call at record: how long the real server may take to answer.

A real server that stays up and stops answering would otherwise hold the flow until the
agent's own timeout, and the failure would name no server. Each request forwarded to a real
server therefore waits at most its server's `call_timeout` (the spec), or else the upstream
timeout (`--upstream-timeout`, the model's wait); when it passes, the record fails naming the
server, the call (method, tool, JSON-RPC id) and the bound. Both transports word it here:
the stdio stand-in with `Deadlines` (a watchdog thread), streamable HTTP with the proxy's
timer (`addons/deadline.py`).

`subscriptions/listen` is not bounded: its answer is a stream that stays open for the
session, as an HTTP standalone stream may.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Requests whose answer is a stream meant to stay open: never bounded, never "unanswered".
STREAMING_METHODS = frozenset({"subscriptions/listen"})
#: How the default bound is changed, as a failure says it.
_DEFAULT_SOURCE = (
    "the upstream timeout; give the server a `call_timeout` in the spec, or set "
    "--upstream-timeout SECONDS or FLOWPROOF_UPSTREAM_TIMEOUT"
)


def call_text(label: str, request_id: Any) -> str:
    """A call as a failure names it: `tools/call read_file (JSON-RPC id 3)`."""
    shown = json.dumps(request_id, ensure_ascii=False)
    return f"{label} (JSON-RPC id {shown if len(shown) <= 80 else shown[:80] + '...'})"


@dataclass(frozen=True)
class CallBound:
    """Seconds a call may wait for its answer, and whether the spec set them."""

    seconds: float
    from_spec: bool = False  # the server's `call_timeout`; else the upstream timeout

    def source(self) -> str:
        return "its `call_timeout`" if self.from_spec else _DEFAULT_SOURCE

    def not_answered(self, call: str) -> str:
        """What a server did when the bound of `call` (a `call_text`) passed."""
        return f"did not answer {call} within {self.seconds:g} s ({self.source()})"

    def server_not_answered(self, server: str, call: str) -> str:
        """`not_answered`, naming the server (the HTTP boundary's failure line)."""
        return (
            f"the MCP server '{server}' did not answer {call} within {self.seconds:g} s "
            f"({self.source()})"
        )

    def unanswered_at_end(self, server: str, call: str) -> str:
        """A call still waiting when the agent stopped waiting for it: the flow's timeout
        stopped the agent, or its own client gave up first."""
        return (
            f"the MCP server '{server}' had not answered {call} when the agent stopped "
            f"waiting (the call's bound: {self.seconds:g} s)"
        )


class Deadlines:
    """The calls waiting for a real server, each with its deadline, watched by one thread:
    `on_expired(call)` runs there, once, for the first call whose bound passes.

    `start` a call when it is sent, `extend` it when the server reports progress on it,
    `end` it when answered; `stop` ends the watch."""

    def __init__(self, bound: CallBound, on_expired: Callable[[str], None]) -> None:
        self.bound = bound
        self._on_expired = on_expired
        self._due: dict[str, tuple[float, str]] = {}  # key -> (deadline, call text)
        self._changed = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._watch, name="mcp-call-bound", daemon=True)
        self._thread.start()

    def start(self, key: str, call: str) -> None:
        with self._changed:
            self._due[key] = (time.monotonic() + self.bound.seconds, call)
            self._changed.notify()

    def extend(self, key: str) -> None:
        with self._changed:
            if key in self._due:
                self._due[key] = (time.monotonic() + self.bound.seconds, self._due[key][1])

    def end(self, key: str) -> None:
        with self._changed:
            self._due.pop(key, None)

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)

    def _watch(self) -> None:
        with self._changed:
            while not self._stopped:
                if not self._due:
                    self._changed.wait()
                    continue
                deadline, call = min(self._due.values())
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    self._changed.wait(remaining)
                    continue
                self._stopped = True
                break
            else:
                return
        self._on_expired(call)
