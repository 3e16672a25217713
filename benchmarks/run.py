"""Side-by-side measurements, reported as ratios (never asserted in the test suite).

    make bench

replay_overhead: the same chat completion fetched N times with the real `openai` SDK,
(a) from a bare asyncio HTTP/1.1 stub answering canned bytes (the floor) and (b) from
flowproof's replay proxy, which answers from a cassette. Both servers run on 127.0.0.1 in
this process tree; rounds alternate and the median of each is reported, with their ratio.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from openai import OpenAI  # noqa: E402

from flowproof_addons.guard import RequestGuard  # noqa: E402
from flowproof_addons.model import ModelBoundary  # noqa: E402
from flowproof_cli.cassette import CassetteSession, Mode, Turn  # noqa: E402
from flowproof_cli.runner.proxy import ProxyHost  # noqa: E402
from tests.fakes.fake_upstream import FakeUpstream  # noqa: E402

CALLS = 300
ROUNDS = 3
MESSAGES = [{"role": "user", "content": "What's the weather in Nairobi?"}]


def start_floor_server(body: bytes) -> str:
    """The floor: a bare asyncio HTTP/1.1 keep-alive server answering one canned body."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, int] = {}
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(body)}\r\n\r\n".encode()
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            headers = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in headers.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(head + body)
            await writer.drain()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        holder["port"] = server.sockets[0].getsockname()[1]
        ready.set()
        await server.serve_forever()

    threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True).start()
    ready.wait(10)
    return f"http://127.0.0.1:{holder['port']}/v1"


def timed_calls(base_url: str) -> list[float]:
    client = OpenAI(base_url=base_url, api_key="x", max_retries=0)
    client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)  # warm up
    samples = []
    for _ in range(CALLS):
        started = time.perf_counter()
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        samples.append(time.perf_counter() - started)
    return samples


def start_replay_proxy(turn: Turn) -> tuple[str, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, int] = {}

    async def serve() -> None:
        boundary = ModelBoundary()
        boundary.default = CassetteSession(Mode.REPLAY, recorded=[turn] * (CALLS * ROUNDS + 10))
        async with ProxyHost([RequestGuard(), boundary]) as proxy:
            holder["port"] = proxy.port
            ready.set()
            await asyncio.Event().wait()

    threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True).start()
    ready.wait(10)
    return f"http://127.0.0.1:{holder['port']}/v1", loop


def main() -> None:
    with FakeUpstream() as fake:
        direct = f"{fake.base_url}/v1"
        client = OpenAI(base_url=direct, api_key="x")
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=MESSAGES
        )
        turn = Turn(
            "openai-chat",
            {"model": "gpt-4o-mini", "messages": MESSAGES},
            200,
            raw.http_response.json(),
        )
        replay, _loop = start_replay_proxy(turn)
        floor = start_floor_server(json.dumps(turn.response).encode())
        servers = {"bare asyncio stub (floor)": floor, "flowproof replay": replay}
        results: dict[str, list[float]] = {name: [] for name in servers}
        for _ in range(ROUNDS):
            for name, url in servers.items():
                results[name].append(statistics.median(timed_calls(url)))
    base = statistics.median(results["bare asyncio stub (floor)"])
    print(f"replay_overhead: {CALLS} sequential openai SDK calls x {ROUNDS} alternating rounds")
    for name, medians in results.items():
        value = statistics.median(medians)
        print(f"  {name:32s} p50 {value * 1000:6.2f} ms   ratio {value / base:4.2f}")


if __name__ == "__main__":
    main()
