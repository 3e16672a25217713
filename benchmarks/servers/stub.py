"""The floor: a bare asyncio HTTP/1.1 keep-alive server answering canned bytes.

    python benchmarks/servers/stub.py RESPONSES.json

RESPONSES.json holds `json` and `sse` lists (benchmarks/payloads.py writes it); request
N gets entry N modulo their length, as SSE when its body asks for `"stream": true`. It
parses nothing else, so it is the least any server could cost. First stdout line:
`PORT <n>`; serves on 127.0.0.1 until SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

_STREAM_FLAGS = (b'"stream": true', b'"stream":true')


def _answer(body: str, content_type: str) -> bytes:
    data = body.encode()
    head = f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {len(data)}\r\n\r\n"
    return head.encode() + data


class Stub:
    def __init__(self, responses: dict[str, list[str]]):
        self._json = [_answer(b, "application/json") for b in responses["json"]]
        self._sse = [_answer(b, "text/event-stream") for b in responses["sse"]]
        self._served = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in headers.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length)
                answers = self._sse if any(f in body for f in _STREAM_FLAGS) else self._json
                writer.write(answers[self._served % len(answers)])
                self._served += 1
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def main(path: Path) -> None:
    stub = Stub(json.loads(path.read_text()))
    server = await asyncio.start_server(stub.handle, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
