"""The keeper's own program: ends what a killed flowproof left behind.

`process.Keeper` runs this file as a script (`python -I -S keeper.py`: no site, no user
path, so it starts in milliseconds) in a session of its own. It reads `[op, kind, value]`
lines on stdin (`+` holds, `-` releases) until flowproof's end of the pipe closes, however
flowproof ended, then kills the process groups, the cgroups and the marked processes still
held and removes the paths. A clean run releases everything first, so it finds nothing.

It imports nothing of the project: it must run whatever state flowproof died in.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time

GROUP, MARKER, CGROUP, PATH = "group", "marker", "cgroup", "path"
_TRIES = 40  # a cgroup's members and its removal, each tried this often, 50 ms apart
_PAUSE_S = 0.05

Held = dict[str, set[int | str]]


def read_held(stdin: int = 0) -> Held:
    """What is still held when the pipe closes."""
    held: Held = {GROUP: set(), MARKER: set(), CGROUP: set(), PATH: set()}
    pending = b""
    while chunk := os.read(stdin, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            op, kind, value = json.loads(line)
            (held[kind].add if op == "+" else held[kind].discard)(value)
    return held


def kill_groups(groups: set[int | str]) -> None:
    for group in groups:
        with contextlib.suppress(OSError):
            os.killpg(int(group), signal.SIGKILL)


def _kill_members(cgroup: str) -> None:
    """Without `cgroup.kill` (an older kernel): its members, one by one, until none is left."""
    for _ in range(_TRIES):
        try:
            with open(os.path.join(cgroup, "cgroup.procs")) as procs:
                members = [int(pid) for pid in procs.read().split()]
        except (OSError, ValueError):
            return
        if not members:
            return
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(_PAUSE_S)


def end_cgroups(cgroups: set[int | str]) -> None:
    """Everything in each cgroup killed, then the cgroup removed (once it is empty)."""
    for cgroup in map(str, cgroups):
        try:
            kill = os.open(os.path.join(cgroup, "cgroup.kill"), os.O_WRONLY)
            try:
                os.write(kill, b"1")
            finally:
                os.close(kill)
        except OSError:
            _kill_members(cgroup)
        for _ in range(_TRIES):
            try:
                os.rmdir(cgroup)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(_PAUSE_S)


def kill_marked(held_markers: set[int | str]) -> None:
    """Every process whose environment holds one of the markers (an agent's descendants
    inherit it, wherever they moved), three sweeps apart."""
    markers = {os.fsencode(str(marker)) for marker in held_markers}
    for _ in range(3 if markers and os.path.isdir("/proc") else 0):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open("/proc/" + entry + "/environ", "rb") as stream:
                    marked = not markers.isdisjoint(stream.read().split(b"\0"))
                if marked:
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
        time.sleep(_PAUSE_S)


def remove_paths(paths: set[int | str]) -> None:
    for path in map(str, paths):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is flowproof's, not the keeper's
    held = read_held()
    kill_groups(held[GROUP])
    end_cgroups(held[CGROUP])
    kill_marked(held[MARKER])
    remove_paths(held[PATH])


if __name__ == "__main__":
    main()
