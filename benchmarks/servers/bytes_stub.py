"""The floor for a non-SSE stream: a bare asyncio HTTP/1.1 keep-alive server answering every
request with the same canned bytes.

    python benchmarks/servers/bytes_stub.py BODY_FILE CONTENT_TYPE

It parses nothing but the request's length, so it is the least any server could cost for
that answer (an AWS event stream here: the same bytes flowproof's replay serves). First
stdout line: `PORT <n>`; serves on 127.0.0.1 until SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path


class Stub:
    def __init__(self, body: bytes, content_type: str):
        head = f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n"
        self.answer = head.encode() + f"content-length: {len(body)}\r\n\r\n".encode() + body

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in headers.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                await reader.readexactly(length)
                writer.write(self.answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def main(path: Path, content_type: str) -> None:
    stub = Stub(path.read_bytes(), content_type)
    server = await asyncio.start_server(stub.handle, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
