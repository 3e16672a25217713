"""The leaky agent (one undeclared destination, one deleted scratch file, then a real tool
loop), first deleting $NOISY_COUNT files of its own in $NOISY_DIR: a filesystem report long
enough to bury a blocked line. Run only inside a test network namespace."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

folder = Path(os.environ["NOISY_DIR"])
folder.mkdir(parents=True, exist_ok=True)
for n in range(int(os.environ["NOISY_COUNT"])):
    path = folder / f"cache-{n}.tmp"
    with open(path, "x") as handle:  # O_EXCL, no O_TRUNC: not trapped
        handle.write("x")
    path.unlink()  # trapped: one `unlink` line each

LEAKY = Path(__file__).with_name("leaky_agent.py")
sys.argv = [str(LEAKY)]
runpy.run_path(str(LEAKY), run_name="__main__")
