"""`--fs-report` through the real CLI, inside a network namespace of its own.

Run as `unshare -n python -m tests.egress.fs_report_lab SPEC` by
tests/egress/test_fs_report.py: it brings up loopback, starts the fake model on it, and
records and replays one contained flow whose agent deletes many files and tries one
undeclared destination (refused by the supervisor before any packet is sent).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.flows import write_flow
from tests.egress.cli_lab import cli, command
from tests.fakes.fake_upstream import FakeUpstream

NOISY = Path(__file__).with_name("agents") / "noisy_agent.py"
DELETED = 40  # the agent's own deletions, plus the leaky agent's scratch file


def scenarios(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    env = {
        "NOISY_DIR": str(folder / "cache"),
        "NOISY_COUNT": str(DELETED),
        "LEAKY_PROBE": str(folder / "probe.txt"),
        "LEAKY_SCRATCH": str(folder / "scratch.txt"),
    }
    with FakeUpstream() as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        spec = write_flow(folder, name="noisy", command=command(NOISY), env=env)
        document = yaml.safe_load(spec.read_text())
        document["agent"]["allow_egress"] = []  # contained: nothing off-host is declared
        spec.write_text(yaml.safe_dump(document, sort_keys=False))
        out["record"] = cli("record", spec, env=upstream)  # the default: summary
        out["full"] = cli("run", spec, "--fs-report", "full")
        out["off"] = cli("run", spec, "--fs-report", "off")
    return out


def main(argv: list[str]) -> None:
    spec = json.loads(argv[0])
    if os.readlink("/proc/self/ns/net") == spec["outer_netns"]:
        raise SystemExit("refusing to run: not inside a network namespace of its own")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory(prefix="flowproof-fs-report-") as folder:
        print("FS_LAB " + json.dumps(scenarios(Path(folder))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
