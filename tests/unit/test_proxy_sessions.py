"""One proxy serves several flows at once: each listening port answers from its own cassette."""

from __future__ import annotations

import asyncio
import http.client
import json
from typing import Any

from flowproof_addons.guard import RequestGuard
from flowproof_addons.model import ModelBoundary
from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.runner.proxy_engine import ProxyEngine

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _turn(text: str) -> Turn:
    message = {"role": "assistant", "content": text}
    body = {"id": text, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return Turn("openai-chat", REQUEST, 200, body)


def _ask(port: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            "POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"}
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


async def _serve_two_flows() -> list[tuple[int, dict[str, Any]]]:
    boundary = ModelBoundary()
    first = CassetteSession(Mode.REPLAY, recorded=[_turn("from flow A")])
    second = CassetteSession(Mode.REPLAY, recorded=[_turn("from flow B")])
    async with ProxyEngine([RequestGuard(), boundary]) as proxy:
        other_port = await proxy.add_listener()
        boundary.sessions[proxy.port] = first
        boundary.sessions[other_port] = second
        answers = [
            await asyncio.to_thread(_ask, other_port, REQUEST),
            await asyncio.to_thread(_ask, proxy.port, REQUEST),
            await asyncio.to_thread(_ask, proxy.port, REQUEST),  # flow A's only turn is used
        ]
    assert first.served == [0] and second.served == [0]
    return answers


def test_each_port_answers_from_its_own_cassette() -> None:
    (b_status, b_body), (a_status, a_body), (extra_status, extra_body) = asyncio.run(
        _serve_two_flows()
    )
    assert (b_status, b_body["choices"][0]["message"]["content"]) == (200, "from flow B")
    assert (a_status, a_body["choices"][0]["message"]["content"]) == (200, "from flow A")
    assert extra_status == 409
    assert "extra call" in extra_body["error"]["message"]
