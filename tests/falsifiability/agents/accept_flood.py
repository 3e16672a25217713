"""Run out of file descriptors on a proxy listener, then close it (for test_descriptors.py).

A proxy host with one listener, in a process whose descriptor limit is lowered to LIMIT;
a thread connects to the listener until it cannot open another socket, so the listener's
queue holds connections the proxy cannot accept (EMFILE). After a while the listener is
closed and the host stopped, while Python's accept retries are still due. Prints `the
listener met EMFILE` when the process did run out; stderr is what the test reads.
"""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import socket
import threading

from flowproof_cli.runner.proxy_engine import ProxyEngine

LIMIT = 128
HOLD_S = 3.0


def exhausted() -> bool:
    try:
        os.close(os.dup(0))
    except OSError as exc:
        return exc.errno == errno.EMFILE
    return False


async def main() -> None:
    resource.setrlimit(
        resource.RLIMIT_NOFILE, (LIMIT, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    )
    host = ProxyEngine([], port=None, upstream_tls=False)
    await host.start()
    port = await host.add_listener(0)
    held: list[socket.socket] = []
    ran_out = threading.Event()

    def connect() -> None:
        for _ in range(LIMIT * 2):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break
        if exhausted():
            ran_out.set()

    thread = threading.Thread(target=connect)
    thread.start()
    await asyncio.sleep(HOLD_S)
    thread.join()
    await host.remove_listener(port)
    await host.stop()
    await asyncio.sleep(1.5)  # the retries Python scheduled come due on a closed listener
    for sock in held:
        sock.close()
    if ran_out.is_set():
        print("the listener met EMFILE")


if __name__ == "__main__":
    asyncio.run(main())
