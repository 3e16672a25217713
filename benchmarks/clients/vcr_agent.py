"""The same agent replayed in-process by vcrpy (how many Python teams mock a model).

    python benchmarks/clients/vcr_agent.py CASSETTE.yaml [--record]

`--record` captures the agent's calls against OPENAI_BASE_URL (the stub) once; without it
vcrpy answers every call from the cassette and refuses any it does not hold.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vcr
from agent import run


def main() -> None:
    mode = "all" if "--record" in sys.argv else "none"
    with vcr.use_cassette(sys.argv[1], record_mode=mode):
        print(run())


if __name__ == "__main__":
    main()
