"""One proxy for a whole run: flows open and close listeners on it side by side, each flow's
matcher addons see only its own traffic, and a closed listener leaves no port bound."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import time
from types import SimpleNamespace
from typing import Any

import pytest

from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.errors import ConfigError, PortInUseError
from flowproof_cli.match.addons import ScriptAddon
from flowproof_cli.match.user_code import ScriptCalls
from flowproof_cli.runner.port_scoped import PortScoped
from flowproof_cli.runner.run_proxy import RunProxy

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _turn(text: str) -> Turn:
    message = {"role": "assistant", "content": text}
    body = {"id": text, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return Turn("openai-chat", REQUEST, 200, body)


def _ask(port: int) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            "POST",
            "/v1/chat/completions",
            json.dumps(REQUEST),
            {"content-type": "application/json"},
        )
        response = connection.getresponse()
        body = json.loads(response.read())
        if response.status != 200:
            return response.status, body["error"]["message"]
        return response.status, body["choices"][0]["message"]["content"]
    finally:
        connection.close()


def _is_listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


class SeesRequests:
    """A matcher script's addon with a flow hook: which requests reached it."""

    def __init__(self) -> None:
        self.ports: list[int] = []

    def request(self, flow: Any) -> None:
        self.ports.append(flow.client_conn.sockname[1])

    def joined(self) -> ScriptAddon:
        """As a loaded script hands it to the proxy: its hooks, its script's thread."""
        return ScriptAddon("SeesRequests", {"request": self.request}, ScriptCalls(None))


def test_flows_open_and_close_listeners_side_by_side() -> None:
    """Twenty flows at once on one master: each answered from its own session, every one of
    their ports closed when its flow ends, while the others keep serving."""

    async def scenario() -> tuple[list[tuple[int, str]], list[int]]:
        ports: list[int] = []

        async def flow(number: int) -> tuple[int, str]:
            session = CassetteSession(Mode.REPLAY, recorded=[_turn(f"flow {number}")])
            async with hub.listen(session) as port:
                ports.append(port)
                await asyncio.sleep(0.01 * (number % 3))  # interleave opens and closes
                return await asyncio.to_thread(_ask, port)

        async with RunProxy() as hub:
            answers = await asyncio.gather(*(flow(number) for number in range(20)))
            still_bound = [port for port in ports if _is_listening(port)]
        return answers, still_bound

    answers, still_bound = asyncio.run(scenario())
    assert answers == [(200, f"flow {number}") for number in range(20)]
    assert still_bound == []


def test_a_closed_listener_refuses_and_its_session_is_gone() -> None:
    async def scenario() -> tuple[bool, bool]:
        async with RunProxy() as hub:
            session = CassetteSession(Mode.REPLAY, recorded=[_turn("x")])
            async with hub.listen(session) as port:
                assert hub.model_sessions[port] is session
            return _is_listening(port), port in hub.model_sessions

    assert asyncio.run(scenario()) == (False, False)


def test_a_taken_fixed_port_is_a_named_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        async def scenario() -> None:
            async with RunProxy() as hub:
                session = CassetteSession(Mode.REPLAY, recorded=[])
                async with hub.listen(session, port=port):
                    pass

        with pytest.raises(PortInUseError) as caught:
            asyncio.run(scenario())
    assert caught.value.port == port
    assert f"127.0.0.1:{port} is already in use" in str(caught.value)


def test_matcher_addons_see_only_their_own_flows_requests() -> None:
    first, second = SeesRequests(), SeesRequests()

    async def scenario() -> tuple[int, int]:
        async with RunProxy() as hub:
            one = CassetteSession(Mode.REPLAY, recorded=[_turn("a")])
            two = CassetteSession(Mode.REPLAY, recorded=[_turn("b"), _turn("b")])
            async with (
                hub.listen(one, user_addons=[first.joined()]) as a,
                hub.listen(two, user_addons=[second.joined()]) as b,
            ):
                await asyncio.to_thread(_ask, a)
                await asyncio.to_thread(_ask, b)
                await asyncio.to_thread(_ask, b)
                return a, b

    a, b = asyncio.run(scenario())
    assert first.ports == [a]
    assert second.ports == [b, b]


def test_port_scoped_calls_lifecycle_hooks_itself_and_hides_missing_ones() -> None:
    """mitmproxy sees no `load`/`configure`/`running`/`done` (it would call them on the
    event loop): `start` and `finish` call them in the script's thread."""
    called: list[tuple[str, Any]] = []

    class Script:
        def load(self, loader: Any) -> None:
            called.append(("load", type(loader).__name__))

        def configure(self, updated: set[str]) -> None:
            called.append(("configure", "connection_strategy" in updated))

        def running(self) -> None:
            called.append(("running", None))

        def done(self) -> None:
            called.append(("done", None))

    script = Script()
    hooks = {name: getattr(script, name) for name in ("load", "configure", "running", "done")}
    failures: list[str] = []
    scoped = PortScoped(
        ScriptAddon("Script", hooks, ScriptCalls(None)), {1}, "s@1", failures.append
    )
    for hook in ("load", "configure", "running", "done", "request", "addons"):
        assert not hasattr(scoped, hook), hook  # mitmproxy must not call these itself

    master = SimpleNamespace(options={"connection_strategy": "lazy"})

    async def scenario() -> bool:
        joined = await scoped.start(master)
        await scoped.finish()
        return joined

    assert asyncio.run(scenario()) is True
    assert called == [
        ("load", "_DeferredLoader"),
        ("configure", True),
        ("running", None),
        ("done", None),
    ]
    assert failures == []


def test_an_addon_joining_or_leaving_mid_run_changes_who_is_called() -> None:
    """The engine caches each event's handlers: a flow's matcher addon that joins after
    requests were dispatched is still called, and one whose flow ended is called no more."""
    early, late = SeesRequests(), SeesRequests()

    async def scenario() -> tuple[int, int]:
        async with RunProxy() as hub:
            async with hub.listen(
                CassetteSession(Mode.REPLAY, recorded=[_turn("a")]), user_addons=[early.joined()]
            ) as a:
                await asyncio.to_thread(_ask, a)
            async with hub.listen(
                CassetteSession(Mode.REPLAY, recorded=[_turn("b")]), user_addons=[late.joined()]
            ) as b:
                await asyncio.to_thread(_ask, b)
            return a, b

    a, b = asyncio.run(scenario())
    assert early.ports == [a]
    assert late.ports == [b]


class _EngineBroke(RunProxy):
    """A hub whose engine fails to start, after a moment (the flow is driving by then)."""

    async def _start_engine(self) -> Any:
        await asyncio.sleep(0.2)
        raise ConfigError("the proxy engine did not start within 10 s")


@pytest.mark.parametrize("hub_class", [_EngineBroke, RunProxy])
def test_an_engine_that_does_not_start_ends_the_flow_at_once(hub_class: type[RunProxy]) -> None:
    """Before, the flow's body (an agent waiting on its first call, which sat in the listen
    backlog) ran on to the flow's timeout; now the failure ends it at once and is raised."""
    session = CassetteSession(Mode.REPLAY, recorded=[_turn("served")])
    answers: list[str] = []
    bound_s = 20.0  # the flow's timeout here

    async def flow() -> float:
        hub = hub_class()
        started = asyncio.get_running_loop().time()
        try:
            async with hub.listen(session) as port:
                if hub_class is RunProxy:
                    answers.append((await asyncio.to_thread(_ask, port))[1])
                else:
                    await asyncio.sleep(bound_s)  # the agent, waiting on its first call
        finally:
            await hub.stop()
        return asyncio.get_running_loop().time() - started

    if hub_class is RunProxy:  # the twin: a healthy engine serves, the flow runs its course
        asyncio.run(asyncio.wait_for(flow(), bound_s))
        assert answers == ["served"]
        return
    started = time.monotonic()
    with pytest.raises(ConfigError, match="did not start within 10 s"):
        asyncio.run(asyncio.wait_for(flow(), bound_s + 10))
    assert time.monotonic() - started < bound_s / 2, "the flow waited for its timeout"
