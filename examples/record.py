"""Re-record the example traces against the fake model upstream (no key, offline).

    .venv/bin/python examples/record.py [FLOW ...]    # default: every examples/**/*.flow.yaml

Each flow gets a fresh tests/fakes/fake_upstream.py, seeded so that an unchanged agent
re-records byte for byte, and `flowproof record --yes` (a changed trajectory is printed as a
diff, for review in the commit). `.venv/bin` goes first on PATH, as in `make demo`, and
EXAMPLES_NODE_MODULES is tests/node_modules (the Node agent's `openai`, the `claude` CLI).

Claude Code phones home when it can, so the claude-code-demo flow is recorded only inside a
network namespace with nothing but loopback, under a throwaway HOME:

    unshare -n sh -c 'ip link set lo up && .venv/bin/python examples/record.py \
        examples/claude-code-demo/notes.flow.yaml'
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
REPO = EXAMPLES.parent
sys.path.insert(0, str(REPO))

from tests.fakes.cli_scripts import claude_code  # noqa: E402
from tests.fakes.fake_upstream import FakeUpstream, Script  # noqa: E402

SEED = 1
#: Variables that would send a recording elsewhere than the fake, or hand the agent a real key.
UNSET = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
#: Flows whose model is scripted (every other flow uses the fake's default tool loop).
SCRIPTS: dict[str, Callable[[], Script]] = {"notes.flow.yaml": claude_code}


def record(spec: Path) -> int:
    """Record one flow against its own fake; the exit code is flowproof's."""
    script = SCRIPTS.get(spec.name)
    with FakeUpstream(script=script() if script else None, seed=SEED) as fake:
        env = {name: value for name, value in os.environ.items() if name not in UNSET}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["EXAMPLES_NODE_MODULES"] = str(REPO / "tests" / "node_modules")
        if script is not None:
            env["HOME"] = tempfile.mkdtemp(prefix="flowproof-example-home-")
        env |= {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        command = [sys.executable, "-m", "flowproof_cli", "record", "--yes", str(spec)]
        return subprocess.run(command, env=env, check=False).returncode


def main(argv: list[str]) -> int:
    specs = [Path(arg).resolve() for arg in argv] or sorted(EXAMPLES.glob("*/*.flow.yaml"))
    return max((record(spec) for spec in specs), default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
