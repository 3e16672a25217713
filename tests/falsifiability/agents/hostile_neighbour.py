"""An agent that is a hostile client of its own flow's listener while the run's other flows go
on, then makes its one model call.

It opens HOSTILE_IDLE connections to its proxy port that never send a byte, and one slow
client that sends a request a byte a second. It holds them until HOSTILE_PEERS other flows
have finished (each flow's after_each hook leaves `<spec>.done` in HOSTILE_DIR) or
HOSTILE_DEADLINE_S passes, and writes what it saw to HOSTILE_REPORT (JSON): how many peers
finished while it held them, how many of its idle connections the proxy still kept open, how
many bytes the slow client got in. Then it asks the model one question through the same
listener: the flow passes only if that listener still serves its own agent.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from openai import OpenAI

SLOW_REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"
)


def slow_client(port: int, stop: threading.Event, sent: list[int]) -> None:
    """A request a byte a second, until told to stop or the proxy hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for byte in SLOW_REQUEST * 100:
            if stop.wait(1.0):
                return
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return
            sent[0] += 1


def still_open(sock: socket.socket) -> bool:
    """Whether the proxy still holds this idle connection (no EOF, no reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def peers_done(folder: Path) -> int:
    return len(list(folder.glob("*.done")))


def hold(port: int) -> dict[str, int]:
    idle = [
        socket.create_connection(("127.0.0.1", port), timeout=5)
        for _ in range(int(os.environ.get("HOSTILE_IDLE", "300")))
    ]
    stop, sent = threading.Event(), [0]
    slow = threading.Thread(target=slow_client, args=(port, stop, sent), daemon=True)
    slow.start()
    folder = Path(os.environ["HOSTILE_DIR"])
    peers = int(os.environ.get("HOSTILE_PEERS", "0"))
    deadline = time.monotonic() + float(os.environ.get("HOSTILE_DEADLINE_S", "150"))
    while peers_done(folder) < peers and time.monotonic() < deadline:
        time.sleep(0.2)
    report = {
        "peers_done": peers_done(folder),
        "idle_open": sum(still_open(sock) for sock in idle),
        "slow_bytes": sent[0],
        "slow_alive": int(slow.is_alive()),
    }
    stop.set()
    for sock in idle:
        sock.close()
    return report


def main() -> int:
    port = urlsplit(os.environ["OPENAI_BASE_URL"]).port
    assert port is not None
    report = hold(port)
    Path(os.environ["HOSTILE_REPORT"]).write_text(json.dumps(report))
    answer = OpenAI(max_retries=0).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Hostile neighbour: are you still serving?"}],
    )
    print(answer.choices[0].message.content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
