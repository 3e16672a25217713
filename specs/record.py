"""Re-record the committed traces of specs/ against the fake model upstream (no key, offline).

    .venv/bin/python specs/record.py [FLOW ...]     # default: every specs/*.flow.yaml

Each flow gets a fresh tests/fakes/fake_upstream.py, seeded so that an unchanged agent
re-records byte for byte, and `flowproof record --yes`: a changed trajectory is printed as a
diff and accepted, for review in the commit. The notes agent of mcp.flow.yaml needs a model
that writes, reads and answers; every other flow uses the fake's default tool loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SPECS = Path(__file__).resolve().parent
sys.path.insert(0, str(SPECS.parent))

from tests.fakes.fake_upstream import FakeUpstream, Reply, Script, sequence  # noqa: E402

SEED = 1
#: Variables that would send a recording elsewhere than the fake, or hand the agent a real key.
UNSET = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


def _notes_model() -> Script:
    return sequence(
        Reply(tool_calls=[("write_note", json.dumps({"name": "a.txt", "text": "hello"}))]),
        Reply(tool_calls=[("read_note", json.dumps({"name": "a.txt"}))]),
        Reply(text="The note a.txt says hello."),
    )


SCRIPTS: dict[str, Callable[[], Script]] = {"mcp.flow.yaml": _notes_model}


def record(spec: Path) -> int:
    """Record one flow against its own fake; the exit code is flowproof's."""
    script = SCRIPTS.get(spec.name)
    with FakeUpstream(script=script() if script else None, seed=SEED) as fake:
        env = {name: value for name, value in os.environ.items() if name not in UNSET}
        env |= {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        command = [sys.executable, "-m", "flowproof_cli", "record", "--yes", str(spec)]
        return subprocess.run(command, env=env, check=False).returncode


def main(argv: list[str]) -> int:
    specs = [Path(arg).resolve() for arg in argv] or sorted(SPECS.glob("*.flow.yaml"))
    codes = [record(spec) for spec in specs]
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
