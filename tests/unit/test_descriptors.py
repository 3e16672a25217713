"""File descriptors: the connection cap of a listener, and running out of them named."""

from __future__ import annotations

import asyncio
import errno
import socket
from typing import Any

import pytest

from flowproof_cli.errors import AgentStartError, ConfigError
from flowproof_cli.runner import command, descriptors, listeners
from flowproof_cli.runner.descriptors import (
    AcceptWatch,
    ConnectionCap,
    connection_cap,
    out_of_descriptors,
)

WAIT_S = 10.0


@pytest.mark.parametrize(
    ("limit", "cap"), [(None, 512), (100_000, 512), (2048, 512), (1024, 256), (256, 64), (40, 16)]
)
def test_the_cap_is_a_quarter_of_the_limit_within_bounds(limit: int | None, cap: int) -> None:
    assert connection_cap(limit) == cap


def test_running_out_is_named_with_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(descriptors, "descriptor_limit", lambda: 1024)
    assert out_of_descriptors(OSError(errno.EMFILE, "Too many open files")) == (
        "flowproof ran out of file descriptors (limit 1024, `ulimit -n`)"
    )
    assert out_of_descriptors(OSError(errno.ENFILE, "x")) == (
        "the system ran out of file descriptors (its limit for all processes)"
    )
    assert out_of_descriptors(OSError(errno.EACCES, "x")) is None
    assert out_of_descriptors(ValueError("x")) is None


async def _served(cap: int, connections: int) -> tuple[list[bool], list[tuple[int, str]]]:
    """`connections` clients of a capped server that holds each connection open: whether
    each is still open once all have connected, and what was reported."""
    problems: list[tuple[int, str]] = []
    release = asyncio.Event()

    async def hold(reader: Any, writer: Any) -> None:
        await release.wait()
        writer.close()

    capping = ConnectionCap(lambda port, message: problems.append((port, message)), cap=cap)
    sock = listeners.bind_loopback(0)
    port = listeners.port_of(sock)
    server = await asyncio.start_server(capping.wrap(port, hold), sock=sock)
    clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
    await asyncio.sleep(0.2)  # every connection accepted (or closed) by now
    still_open = []
    for reader, _ in clients:
        try:
            data = await asyncio.wait_for(reader.read(1), 0.2)
            still_open.append(data != b"")  # EOF: closed by the server
        except TimeoutError:
            still_open.append(True)  # nothing to read and no EOF: held open
        except ConnectionError:
            still_open.append(False)
    release.set()
    for _, writer in clients:
        writer.close()
    server.close()
    await server.wait_closed()
    return still_open, problems


def test_a_listener_serves_up_to_its_cap_and_closes_the_rest() -> None:
    still_open, problems = asyncio.run(asyncio.wait_for(_served(cap=3, connections=5), WAIT_S))
    assert still_open == [True, True, True, False, False]
    ((port, message),) = problems  # reported once, however many were closed
    assert message.startswith(
        f"the agent held 3 connections open to flowproof's proxy on 127.0.0.1:{port} at once, "
        "the limit of one listener ("
    )
    assert "every connection over it was closed unanswered. Fix: reuse connections" in message


def _accept_failure(sock: socket.socket, exc: BaseException) -> dict[str, Any]:
    return {"message": "socket.accept() out of system resource", "exception": exc, "socket": sock}


def test_running_out_on_accept_fails_the_flow_of_that_listener_once() -> None:
    problems: list[tuple[int, str]] = []
    watch = AcceptWatch(lambda port, message: problems.append((port, message)))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        for _ in range(3):
            assert watch.handled(_accept_failure(sock, OSError(errno.EMFILE, "x")))
        assert not watch.handled(_accept_failure(sock, OSError(errno.ENOBUFS, "x")))
    ((where, message),) = problems
    assert where == port
    assert message.startswith("flowproof ran out of file descriptors (limit ")
    assert f"could not accept the agent's connection on 127.0.0.1:{port}" in message
    assert message.endswith("or run fewer flows at once (-j)")


def test_the_watch_drops_retries_of_a_closed_listener_and_passes_on_the_rest() -> None:
    seen: list[str] = []
    watch = AcceptWatch(lambda port, message: None)
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(lambda _, context: seen.append(context["message"]))
        watch.install(loop)
        watch.install(loop)  # twice over its own handler: still one watch
        retry = "Exception in callback BaseSelectorEventLoop._start_serving(<function x>)"
        loop.call_exception_handler(
            {"message": retry, "exception": ValueError("Invalid file descriptor: -1")}
        )
        loop.call_exception_handler({"message": "something else", "exception": RuntimeError()})
    finally:
        loop.close()
    assert seen == ["something else"]


def test_an_agent_that_cannot_start_for_want_of_descriptors_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(descriptors, "descriptor_limit", lambda: 1024)
    error = command._cannot_start("python", OSError(errno.EMFILE, "Too many open files"))
    assert isinstance(error, AgentStartError)
    assert str(error) == (
        "cannot start the agent 'python': flowproof ran out of file descriptors (limit 1024, "
        "`ulimit -n`). Fix: raise the limit (`ulimit -n 4096` before flowproof) or run fewer "
        "flows at once (-j)"
    )

    def no_file() -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(command.tempfile, "TemporaryFile", no_file)
    with pytest.raises(AgentStartError, match=r"ran out of file descriptors \(limit 1024"):
        command._output_file("python")


def test_a_listener_that_cannot_be_made_for_want_of_descriptors_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(descriptors, "descriptor_limit", lambda: 256)

    def no_socket(*args: Any) -> socket.socket:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(listeners.socket, "socket", no_socket)
    with pytest.raises(ConfigError) as caught:
        listeners.bind_loopback(0)
    assert str(caught.value) == (
        "cannot listen on 127.0.0.1:any: flowproof ran out of file descriptors (limit 256, "
        "`ulimit -n`). Fix: raise the limit (`ulimit -n 4096` before flowproof) or run fewer "
        "flows at once (-j)"
    )
