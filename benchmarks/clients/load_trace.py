"""Time `flowproof_cli.trace.load` on one trace, in a fresh process.

python benchmarks/clients/load_trace.py TRACE
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flowproof_cli import trace

if __name__ == "__main__":
    started = time.perf_counter()
    loaded = trace.load(Path(sys.argv[1]))
    elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "turns": len(loaded.turns)}))
