"""The keeper's program, run as flowproof runs it: what is still held when its pipe closes
is ended; what was released is left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from flowproof_cli import keeper
from flowproof_cli.process import _KEEPER_PROGRAM


def test_flowproof_runs_the_keeper_module_as_a_script() -> None:
    assert Path(_KEEPER_PROGRAM) == Path(keeper.__file__)


def test_what_is_held_at_the_end_is_ended_and_what_was_released_stays(tmp_path: Path) -> None:
    held, released = tmp_path / "held", tmp_path / "released"
    held.mkdir()
    released.write_text("x")
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    lines = [
        ["+", keeper.PATH, str(held)],
        ["+", keeper.PATH, str(released)],
        ["-", keeper.PATH, str(released)],
        ["+", keeper.GROUP, sleeper.pid],
    ]
    program = subprocess.Popen([sys.executable, "-I", "-S", _KEEPER_PROGRAM], stdin=subprocess.PIPE)
    assert program.stdin is not None
    program.stdin.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    program.stdin.close()  # flowproof is gone
    assert program.wait(timeout=10) == 0
    assert sleeper.wait(timeout=10) == -9
    assert not held.exists() and released.exists()


def test_a_line_split_across_reads_is_read_whole() -> None:
    reader, writer = os.pipe()
    line = json.dumps(["+", keeper.MARKER, "FLOWPROOF_X=1"]).encode() + b"\n"
    os.write(writer, line[:5])
    time.sleep(0.01)
    os.write(writer, line[5:])
    os.close(writer)
    assert keeper.read_held(reader)[keeper.MARKER] == {"FLOWPROOF_X=1"}
    os.close(reader)
