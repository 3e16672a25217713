"""Not a test: the program `test_cli_fork_server.py` runs both ways (`python -m` and as a
fork of the CLI's fork server) to compare what each sees. It prints one JSON document of its
state, then does what its one argument asks: `exit-N`, `signal-N`, `sleep`, `interrupt`."""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def state() -> dict[str, object]:
    dispositions = {}
    for number in sorted(signal.valid_signals()):
        handler = signal.getsignal(number)
        dispositions[str(int(number))] = getattr(handler, "__name__", str(handler))
    return {
        "argv": sys.argv,
        "path0": sys.path[0],
        "cwd": os.getcwd(),
        "environ": dict(os.environ),
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "signals": dispositions,
        "stdout": [type(sys.stdout).__name__, sys.stdout.encoding, sys.stdout.line_buffering],
        "stderr": [sys.stderr.encoding, sys.stderr.errors, sys.stderr.line_buffering],
        "name": __name__,
        "pgid": os.getpgid(0) == os.getpgid(int(os.environ.get("FORK_PROBE_CALLER", "0"))),
    }


def main() -> None:
    action = sys.argv[1] if len(sys.argv) > 1 else "exit-0"
    if action == "state":
        json.dump(state(), sys.stdout)
    print("to stderr\r\nand a second line", file=sys.stderr)
    if action.startswith("exit-"):
        raise SystemExit(int(action.removeprefix("exit-")))
    if action.startswith("signal-"):
        sys.stdout.flush()
        os.kill(os.getpid(), int(action.removeprefix("signal-")))
        time.sleep(5)
    if action == "sleep":
        print(os.getpid(), flush=True)
        time.sleep(60)
    if action == "interrupt":
        raise KeyboardInterrupt


if __name__ == "__main__":
    main()
