"""A real openai-SDK agent with two side effects before its tool loop: it tries an
undeclared off-host destination and deletes a scratch file. Run only inside a test network
namespace. It appends what its connect got to $LEAKY_PROBE (an append is never trapped)."""

from __future__ import annotations

import errno
import os
import runpy
import socket
import struct
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parents[2] / "e2e" / "agents" / "tool_loop_agent.py"

with socket.socket() as sock:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("<qq", 1, 0))
    try:
        sock.connect(("203.0.113.7", 443))
        outcome = "OK"
    except OSError as exc:
        outcome = errno.errorcode.get(exc.errno or 0, str(exc.errno))
with open(os.environ["LEAKY_PROBE"], "a") as probe:
    probe.write(outcome + "\n")

scratch = Path(os.environ["LEAKY_SCRATCH"])
with open(scratch, "x") as handle:  # O_EXCL, no O_TRUNC: not destructive, not trapped
    handle.write("precious")
scratch.unlink()

sys.argv = [str(AGENT)]
runpy.run_path(str(AGENT), run_name="__main__")
