"""The url driver: trigger an already-running service with one POST and wait for its answer.

flowproof did not start the service, so it cannot set its environment or kill it: the service
must already point its model client at the proxy's fixed port (`agent.proxy_port`). The
trigger's HTTP status is reported, never judged: what the service did is in the trajectory
the proxy saw, and a service may answer 200 after swallowing a divergence or 500 after a
perfectly recorded run.

The POST runs in a daemon thread with the stdlib client (no extra dependency); cancelling
the wait (timeout, Ctrl-C, SIGTERM) shuts the socket down, so the thread ends with it and
never holds the interpreter open.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from flowproof_cli.errors import ConfigError

BODY_TAIL = 2000  # characters of the service's answer kept for messages


@dataclass(frozen=True)
class TriggerOutcome:
    status: int | None  # None: no answer (unreachable, or timed out)
    body: str  # the tail of the answer
    timed_out: bool
    error: str | None  # why the service could not be reached

    @property
    def answered_ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def _connection(url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"agent.url {url!r} is not an http(s) URL. Fix: e.g. http://127.0.0.1:8000/run"
        )
    target = parts.path or "/"
    if parts.query:
        target += f"?{parts.query}"
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return kind(parts.hostname, parts.port, timeout=timeout_s), target


def _shutdown(connection: http.client.HTTPConnection) -> None:
    """Unblock a thread waiting on this connection (close() alone may not wake a recv)."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    connection.close()


async def trigger(
    url: str,
    prompt: str,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
    fields: Mapping[str, Any] | None = None,
) -> TriggerOutcome:
    """POST {"prompt": prompt, **fields} to url and wait (at most timeout_s) for the answer
    (`fields`: a conversation turn's `conversation_id` and `turn`)."""
    loop = asyncio.get_running_loop()
    connection, target = _connection(url, timeout_s)
    body = json.dumps({"prompt": prompt, **(fields or {})}, ensure_ascii=False).encode()
    sent = {"content-type": "application/json", "accept": "application/json", **headers}
    answer: asyncio.Future[tuple[int, str]] = loop.create_future()

    def deliver(result: tuple[int, str] | BaseException) -> None:
        if answer.done():
            return
        if isinstance(result, BaseException):
            answer.set_exception(result)
        else:
            answer.set_result(result)

    def post() -> None:
        result: tuple[int, str] | BaseException
        try:
            connection.request("POST", target, body=body, headers=sent)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
            result = (response.status, text[-BODY_TAIL:])
        except BaseException as exc:
            result = exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
            loop.call_soon_threadsafe(deliver, result)

    threading.Thread(target=post, name="flowproof-trigger", daemon=True).start()

    def finish(
        status: int | None = None, text: str = "", *, timed_out: bool = False, error: str = ""
    ) -> TriggerOutcome:
        return TriggerOutcome(status, text, timed_out, error or None)

    try:
        status, text = await asyncio.wait_for(answer, timeout=timeout_s)
    except TimeoutError:  # the wait's bound, or the socket's own timeout: the same bound
        return finish(timed_out=True)
    except (OSError, http.client.HTTPException) as exc:
        return finish(error=_describe(exc))
    finally:
        answer.cancel()  # a late answer from the thread is dropped, not left unretrieved
        _shutdown(connection)
    return finish(status, text)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the service running and listening there?)"
    if isinstance(exc, socket.gaierror):
        return f"the host name does not resolve ({exc.strerror})"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the service closed the connection without answering"
    return f"{type(exc).__name__}: {exc}"
