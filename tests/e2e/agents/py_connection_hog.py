"""An agent that holds many idle connections to its proxy, for the descriptor tests.

Before anything else it opens HOG_CONNECTIONS TCP connections to the port of
OPENAI_BASE_URL and sends nothing on them. One process's descriptor limit may be below
that (flowproof run under `ulimit -n 1024` hands its agents the same limit), so they are
held by forked helpers, each opening at most its own limit less a few spare, until the
agent exits. Opening stops at the first connection that fails; how many were opened is
written to HOG_OPENED, when set. Then it runs the regular tool-loop agent, every knob of
tool_loop_agent.py included.
"""

from __future__ import annotations

import os
import resource
import runpy
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

AGENTS = Path(__file__).resolve().parent
SPARE = 64  # descriptors each helper keeps free


def helper(share: int, port: int, report: int, hold: int) -> None:
    """In a forked child: open `share` connections, report how many, hold them until the
    agent's end of `hold` closes (it exited, however)."""
    held = []
    for _ in range(share):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    os.write(report, f"{len(held)}\n".encode())
    os.read(hold, 1)
    os._exit(0)


def hold(count: int, port: int) -> int:
    """Start helpers until `count` connections are open (or one fell short); how many are."""
    per_helper = max(1, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - SPARE)
    hold_read, hold_write = os.pipe()  # the helpers' lifeline: EOF once the agent is gone
    opened = 0
    while opened < count:
        share = min(per_helper, count - opened)
        report_read, report_write = os.pipe()
        if os.fork() == 0:
            os.close(hold_write)
            helper(share, port, report_write, hold_read)
        os.close(report_write)
        got = int(os.read(report_read, 32) or b"0")
        os.close(report_read)
        opened += got
        if got < share:
            break
    os.close(hold_read)
    return opened


def main() -> None:
    port = urlsplit(os.environ["OPENAI_BASE_URL"]).port
    assert port is not None
    opened = hold(int(os.environ.get("HOG_CONNECTIONS") or 0), port)
    if os.environ.get("HOG_OPENED"):
        Path(os.environ["HOG_OPENED"]).write_text(str(opened))
    sys.argv = [str(AGENTS / "tool_loop_agent.py")]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
