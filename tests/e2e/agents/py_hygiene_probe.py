"""An agent that leaves a process behind, for the process-hygiene tests.

Before anything else it double-forks an orphan (no setsid: it stays in the agent's process
group, but its parent is gone, so nobody waits for it), then writes into HYGIENE_DIR:
`agent.pid`, `orphan.pid` and `proxy.port` (from OPENAI_BASE_URL). Then it runs the regular
tool-loop agent, so every knob of tool_loop_agent.py (AGENT_HANG_AFTER, AGENT_MODEL, ...)
works. With HYGIENE_IGNORE_TERM the agent and its orphan ignore SIGTERM (only SIGKILL
ends them). With HYGIENE_DAEMON it first starts a daemon as a careful one does: it
double-forks, calls setsid() (a session and process group of its own) and replaces itself
with `sleep` with an empty environment (no variable of flowproof's left to find it by);
its pid goes to `daemon.pid`.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

AGENTS = Path(__file__).resolve().parent


def spawn_orphan(pidfile: Path) -> None:
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            pidfile.write_text(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    os.waitpid(child, 0)
    while not pidfile.exists():
        time.sleep(0.01)


def spawn_daemon(pidfile: Path) -> None:
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            pidfile.write_text(str(os.getpid()))
            os.execve("/bin/sleep", ["sleep", "600"], {})
        os._exit(0)
    os.waitpid(child, 0)
    while not pidfile.exists():
        time.sleep(0.01)


def main() -> None:
    folder = Path(os.environ["HYGIENE_DIR"])
    if os.environ.get("HYGIENE_DAEMON"):
        spawn_daemon(folder / "daemon.pid")
    if os.environ.get("HYGIENE_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    spawn_orphan(folder / "orphan.pid")
    (folder / "proxy.port").write_text(str(urlsplit(os.environ["OPENAI_BASE_URL"]).port))
    (folder / "agent.pid").write_text(str(os.getpid()))
    sys.argv = [str(AGENTS / "tool_loop_agent.py")]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
